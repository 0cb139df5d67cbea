package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// The SASL mechanisms that sign in with something other than a password.
const (
	mechOAuthBearer = "oauthbearer"
	mechAWSMSKIAM   = "aws_msk_iam"
)

// oauthRefreshFactor is how much of a token's lifetime passes before a
// new one is fetched, as Kafka's own clients do by default
// (sasl.login.refresh.window.factor 0.8): every new connection and every
// reauthentication then gets a token far from its expiry.
const oauthRefreshFactor = 0.8

// oauthTokenTimeout bounds one request to the token endpoint.
const oauthTokenTimeout = 10 * time.Second

// oauthSource fetches access tokens from an OIDC provider by the client
// credentials grant and keeps each until oauthRefreshFactor of its
// lifetime has passed. A token without an expiry is fetched again for
// every sign-in.
type oauthSource struct {
	cfg    clientcredentials.Config
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	token     string
	subject   string // the last token's sub claim, "" if it is no JWT
	refreshAt time.Time
}

func newOAuthSource(tokenURL, clientID, secret, scopes string) *oauthSource {
	return &oauthSource{
		cfg: clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: tokenURL,
			Scopes: strings.FieldsFunc(scopes, func(r rune) bool { return r == ',' || r == ' ' })},
		client: &http.Client{Timeout: oauthTokenTimeout},
		now:    time.Now,
	}
}

// Token returns a token valid for a while yet, fetching one when the last
// is past its refresh time.
func (s *oauthSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.token != "" && now.Before(s.refreshAt) {
		return s.token, nil
	}
	tok, err := s.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, s.client))
	if err != nil {
		var re *oauth2.RetrieveError
		refused := false
		if errors.As(err, &re) {
			// The provider's answer, without the request: one line.
			err = fmt.Errorf("%s %s", re.Response.Status, strings.Join(strings.Fields(string(re.Body)), " "))
			if c := re.Response.StatusCode; c == http.StatusBadRequest || c == http.StatusUnauthorized || c == http.StatusForbidden {
				refused = true
				err = fmt.Errorf("%w; check --%s, --%s and --%s", err, flagSASLOAuthClientID, flagSASLOAuthClientSecret, flagSASLOAuthScope)
			}
		}
		err = fmt.Errorf("oauth token from %s for client %q: %w", redactURL(s.cfg.TokenURL), s.cfg.ClientID, err)
		if refused {
			err = &oauthRefusedError{err}
		}
		return "", err
	}
	if tok.AccessToken == "" {
		return "", fmt.Errorf("oauth token from %s: no access_token in the answer", redactURL(s.cfg.TokenURL))
	}
	// The lifetime is the answer's expires_in, counted from when it was
	// asked (the answer's Expiry is on the wall clock, not on s.now).
	lifetime := time.Duration(tok.ExpiresIn) * time.Second
	if lifetime == 0 && !tok.Expiry.IsZero() {
		lifetime = time.Until(tok.Expiry)
	}
	s.token, s.refreshAt = tok.AccessToken, now.Add(time.Duration(float64(lifetime)*oauthRefreshFactor))
	s.subject = jwtSubject(tok.AccessToken)
	return s.token, nil
}

// Subject is the sub claim of the last token fetched, which a broker
// takes as the principal by default (sasl.oauthbearer.sub.claim.name), or
// "" before the first fetch or for a token that is no JWT. It is read
// without checking the signature: it names the principal in messages only.
func (s *oauthSource) Subject() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subject
}

// jwtSubject is the sub claim of a JWT (RFC 7519), unverified, or "".
func jwtSubject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Sub
}

// oauthRefusedError is the provider's refusal of the client (400, 401 or
// 403: invalid_client, unauthorized_client, invalid_scope, ...): no retry
// of the same credentials gets another answer. It is an authentication
// failure (errors.Is kerr.SaslAuthenticationFailed), so a sign-in or
// reauthentication that needs a new token mid-run ends the command with
// one line, as a refused password does, instead of being retried forever.
// Any other failure (a provider down, a 5xx, a timeout) is retried.
type oauthRefusedError struct{ err error }

func (e *oauthRefusedError) Error() string { return e.err.Error() }

func (e *oauthRefusedError) Unwrap() []error { return []error{e.err, kerr.SaslAuthenticationFailed} }

// oauthMechanism is SASL OAUTHBEARER with tokens from src.
func oauthMechanism(src *oauthSource) sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := src.Token(ctx)
		return oauth.Auth{Token: tok}, err
	})
}

// awsMechanism is SASL AWS_MSK_IAM with the AWS SDK's default credential
// chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
// shared files, web identity as EKS gives a pod, the instance's role),
// asked at each sign-in; the SDK caches and renews them. The region is the
// broker's (from its MSK host name) or AWS_REGION.
func awsMechanism(ctx context.Context) (sasl.Mechanism, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws credentials: %w", err)
	}
	return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
		c, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return aws.Auth{}, fmt.Errorf("aws credentials for AWS_MSK_IAM: %w", err)
		}
		return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken}, nil
	}), nil
}

// checkTokenURL checks --sasl-oauth-token-url: an absolute http(s) URL.
func checkTokenURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return usageErr("--%s %q: want the token endpoint's https:// URL", flagSASLOAuthTokenURL, redactURL(raw))
	}
	return nil
}
