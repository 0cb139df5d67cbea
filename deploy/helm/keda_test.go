package helm

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The ScaledObject is checked against KEDA's own CRD schema
// (testdata/keda.sh_scaledobjects.yaml, from KEDA v2.21.0) the way the API
// server checks a custom resource: the apiextensions pruning algorithm
// lists every field the schema does not know (the server drops them, or
// rejects them under strict field validation), and every value must have
// the schema's type. KEDA's Go types would do the same, at the price of
// controller-runtime and some 300 more packages to compile.

// scaledObject is what the tests read of a ScaledObject once the schema
// has accepted it.
type scaledObject struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

var kedaSchema = sync.OnceValues(func() (*structuralschema.Structural, error) {
	b, err := os.ReadFile("testdata/keda.sh_scaledobjects.yaml")
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		return nil, fmt.Errorf("KEDA CRD: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1alpha1" || v.Schema == nil {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, err
		}
		return structuralschema.NewStructural(&internal)
	}
	return nil, fmt.Errorf("KEDA CRD: no v1alpha1 schema")
})

// decodeScaledObject checks doc against KEDA's schema and decodes it.
func decodeScaledObject(doc []byte) (*scaledObject, error) {
	s, err := kedaSchema()
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(j, &obj); err != nil {
		return nil, err
	}
	if errs := checkTypes(obj, s, ""); len(errs) > 0 {
		return nil, fmt.Errorf("ScaledObject: %s", strings.Join(errs, "; "))
	}
	// ObjectMeta is not in the CRD's schema: the server decodes it as
	// ObjectMeta, and so does this, strictly.
	var meta struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       json.RawMessage   `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(doc, &meta); err != nil {
		return nil, fmt.Errorf("ScaledObject: %w", err)
	}
	if unknown := pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
		return nil, fmt.Errorf("ScaledObject: unknown fields (KEDA's schema): %s", strings.Join(unknown, ", "))
	}
	var so scaledObject
	if err := json.Unmarshal(j, &so); err != nil {
		return nil, err
	}
	return &so, nil
}

// checkTypes reports values whose JSON type is not the schema's, and
// required properties that are missing.
func checkTypes(v any, s *structuralschema.Structural, at string) []string {
	if s == nil || v == nil && s.Nullable {
		return nil
	}
	var errs []string
	bad := func(want string) []string { return []string{fmt.Sprintf("%s: %T, want %s", at, v, want)} }
	if s.XIntOrString {
		switch x := v.(type) {
		case string:
			return nil
		case float64:
			if x != float64(int64(x)) {
				return bad("integer or string")
			}
			return nil
		}
		return bad("integer or string")
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return bad("object")
		}
		if s.ValueValidation != nil {
			for _, r := range s.ValueValidation.Required {
				if _, ok := m[r]; !ok {
					errs = append(errs, fmt.Sprintf("%s.%s: required", at, r))
				}
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, ok := s.Properties[k]; ok {
				errs = append(errs, checkTypes(m[k], &p, at+"."+k)...)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
				errs = append(errs, checkTypes(m[k], s.AdditionalProperties.Structural, at+"."+k)...)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return bad("array")
		}
		for i, e := range a {
			errs = append(errs, checkTypes(e, s.Items, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case "string":
		if _, ok := v.(string); !ok {
			return bad("string")
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			return bad("integer")
		}
	case "number":
		if _, ok := v.(float64); !ok {
			return bad("number")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return bad("boolean")
		}
	}
	return errs
}
