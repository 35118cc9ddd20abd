package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill-operator/workloads/gateway"
)

type specResponse struct {
	Codes   []string                   `json:"x-codes"`
	Content map[string]json.RawMessage `json:"content"`
}

type specOperation struct {
	Responses map[string]specResponse `json:"responses"`
}

type openAPISpec struct {
	Paths      map[string]map[string]specOperation `json:"paths"`
	Components struct {
		Schemas struct {
			Answer struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"Answer"`
		} `json:"schemas"`
	} `json:"components"`
}

var (
	specOnce sync.Once
	spec     openAPISpec
	specErr  error
)

func loadSpec(t *testing.T) *openAPISpec {
	t.Helper()
	specOnce.Do(func() {
		var j []byte
		if j, specErr = yaml.YAMLToJSON(gateway.OpenAPI()); specErr == nil {
			specErr = json.Unmarshal(j, &spec)
		}
	})
	require.NoError(t, specErr)
	return &spec
}

var param = regexp.MustCompile(`\{[^}]+\}`)

// operation finds the operation of a request path, by template.
func (s *openAPISpec) operation(method, path string) (string, *specOperation) {
	for tmpl, ops := range s.Paths {
		if !matches(tmpl, path) {
			continue
		}
		if op, ok := ops[strings.ToLower(method)]; ok {
			return tmpl, &op
		}
	}
	return "", nil
}

// conforming checks every answer of h against the OpenAPI description: the
// route and its HTTP status are described, a JSON answer's code is one that
// status lists, and it has no field the Answer schema does not have.
func conforming(t *testing.T, h http.Handler) http.Handler {
	s := loadSpec(t)
	props := s.Components.Schemas.Answer.Properties
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		tmpl, op := s.operation(r.Method, r.URL.Path)
		status := strconv.Itoa(rec.Code)
		if op == nil {
			if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s answered %d: the route is not in the OpenAPI description", r.Method, r.URL.Path, rec.Code)
			}
		} else if resp, ok := op.Responses[status]; !ok {
			t.Errorf("%s %s answered HTTP %d, which the description of %s does not list", r.Method, r.URL.Path, rec.Code, tmpl)
		} else if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			var a map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
				t.Errorf("%s %s: answer is not JSON: %v", r.Method, r.URL.Path, err)
			} else {
				code, _ := a["code"].(string)
				if !contains(resp.Codes, code) {
					t.Errorf("%s %s answered %d %q; the description lists %v for %d", r.Method, r.URL.Path, rec.Code, code, resp.Codes, rec.Code)
				}
				for k := range a {
					if _, ok := props[k]; !ok {
						t.Errorf("%s %s: field %q is not in the Answer schema", r.Method, r.URL.Path, k)
					}
				}
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = io.Copy(w, bytes.NewReader(rec.Body.Bytes()))
	})
}

// matches reports whether path is an instance of the template.
func matches(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if param.MatchString(ts[i]) && ps[i] != "" {
			continue
		}
		if ts[i] != ps[i] {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The description and the code agree: the same routes, every code the API
// answers under the HTTP status the code gives it, and the Answer enum is
// exactly the codes. Every request of this package's tests is checked
// against it as well (conforming, in newFixture).
func TestOpenAPIDescribesTheHandlers(t *testing.T) {
	s := loadSpec(t)
	var described, served []string
	for tmpl, ops := range s.Paths {
		for m := range ops {
			described = append(described, strings.ToUpper(m)+" "+param.ReplaceAllString(tmpl, "{}"))
		}
	}
	for _, r := range gateway.Routes() {
		served = append(served, r.Method+" "+param.ReplaceAllString(r.Path, "{}"))
	}
	sort.Strings(described)
	sort.Strings(served)
	require.Equal(t, served, described)

	codes := gateway.Codes()
	listed := map[string]bool{}
	for tmpl, ops := range s.Paths {
		for m, op := range ops {
			for status, resp := range op.Responses {
				for _, c := range resp.Codes {
					want, known := codes[c]
					require.True(t, known, "%s %s lists unknown code %s", m, tmpl, c)
					require.Equal(t, strconv.Itoa(want), status, "%s %s lists %s under %s", m, tmpl, c, status)
					listed[c] = true
				}
			}
		}
	}
	var enum []string
	for c := range codes {
		require.True(t, listed[c], "code %s is answered but no operation lists it", c)
		enum = append(enum, c)
	}
	sort.Strings(enum)
	got := append([]string(nil), s.Components.Schemas.Answer.Properties["code"].Enum...)
	sort.Strings(got)
	require.Equal(t, enum, got)

	f := newFixture(t, 1, failingSender{})
	resp, err := http.Get(f.srv.URL + "/openapi.yaml")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, gateway.OpenAPI(), body)
}
