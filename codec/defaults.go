package codec

// DefaultNumberFormat is how the number is written into an event when the
// configuration does not say: as a JSON string, which JavaScript reads
// without losing precision.
const DefaultNumberFormat = FormatString
