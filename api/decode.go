package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/shardplan/shardplan/internal/fielderr"
	"github.com/shardplan/shardplan/internal/sharding"
)

// decodeJSON reads r's body (capped by limitBody) into dst, a pointer to a request
// struct, then validates dst's struct tags. Every failure is a *Problem naming the field
// by its wire path:
//   - empty body, malformed JSON (with the byte offset), trailing data -> 400 invalid-json;
//   - a body that is not a JSON object (null, a number, a string, an array, a boolean)
//     -> 400 invalid-json saying so;
//   - a value of the wrong type -> 400 invalid-json naming the field (array indices
//     included, e.g. "shape[1]");
//   - an unknown field -> 400 invalid-request naming it and the field probably meant;
//   - a key repeated within one object -> 400 invalid-json naming its path;
//   - a body over the limit -> 413;
//   - a validate: tag failure -> 400 invalid-request with one error per field.
func (s *Server) decodeJSON(r *http.Request, dst any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if err := decodeBytes(body, dst); err != nil {
		return err
	}
	return s.validateStruct(dst)
}

func emptyBody() *Problem {
	return NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", "the request body is empty; send a JSON object")
}

// decodeBytes decodes exactly one JSON value from body into dst, disallowing unknown
// fields, and maps encoding/json's errors to problems naming the field. A body of null
// is refused like any other value that is not an object (encoding/json would leave dst
// as it was, a request of zero values).
func decodeBytes(body []byte, dst any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return emptyBody()
	}
	if bytes.Equal(trimmed, []byte("null")) {
		return NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", "the body must be a JSON object, not a JSON null")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonProblem(body, dec, dst, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		off := dec.InputOffset()
		return NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON",
			"unexpected data after the JSON value at offset %d; send exactly one JSON object", off)
	}
	if path, dup := duplicateKey(body); dup {
		return Invalid(slugInvalidJSON, "Malformed JSON",
			sharding.Fieldf(path, "is given more than once; give each key once (with duplicates it is unclear which value is meant)"))
	}
	return nil
}

func jsonProblem(body []byte, dec *json.Decoder, dst any, err error) *Problem {
	malformed := func(format string, args ...any) *Problem {
		return NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", format, args...)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		if word, fix := pythonLiteral(body, se.Offset); word != "" {
			return malformed("malformed JSON at offset %d: %s is Python, not JSON; write %s (JSON's literals are null, true and false)", se.Offset-1, word, fix)
		}
		return malformed("malformed JSON at offset %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("malformed JSON: the body ends at offset %d in the middle of a value", len(body))
	case errors.As(err, &te):
		field := pathAt(body, te.Offset)
		if field == "" {
			field = te.Field
		}
		if field == "" {
			return malformed("the body must be a JSON object, not a JSON %s", te.Value)
		}
		return Invalid(slugInvalidJSON, "Malformed JSON",
			sharding.Fieldf(field, "must be %s, not a JSON %s", goTypeName(te.Type), te.Value))
	}
	if name, ok := fielderr.UnknownJSONField(err); ok {
		field := keyPathBefore(body, dec.InputOffset(), name)
		return unknownFieldProblem(field, name, reflect.TypeOf(dst))
	}
	return malformed("%s", strings.TrimPrefix(err.Error(), "json: "))
}

// pythonLiteral reports the Python literal (None, True, False) that starts where a JSON
// syntax error stopped (off is just past the offending byte), and its JSON spelling.
func pythonLiteral(body []byte, off int64) (word, fix string) {
	if off < 1 || off > int64(len(body)) {
		return "", ""
	}
	rest := body[off-1:]
	for _, l := range [...][2]string{{"None", "null"}, {"True", "true"}, {"False", "false"}} {
		if bytes.HasPrefix(rest, []byte(l[0])) {
			return l[0], l[1]
		}
	}
	return "", ""
}

// goTypeName names a Go type the way a JSON user thinks of it.
func goTypeName(t reflect.Type) string {
	if t == nil {
		return "a different JSON type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer (within range)"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // json.RawMessage
			return "a JSON value"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different JSON type"
}

// jsonPath tracks where a token stream is, as a wire path ("a.b[2].c").
type jsonPath struct {
	frames []pathFrame
}

type pathFrame struct {
	array     bool
	idx       int
	key       string
	expectKey bool
}

func (p *jsonPath) String() string {
	var b strings.Builder
	for _, f := range p.frames {
		if f.array {
			if f.idx >= 0 {
				b.WriteString("[" + strconv.Itoa(f.idx) + "]")
			}
			continue
		}
		if f.key == "" || f.expectKey {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	return b.String()
}

// walk feeds every token of body to fn with the path of the value (or key) it belongs
// to and the offset just after it; fn returns true to stop.
func walkJSON(body []byte, fn func(path string, isKey bool, key string, end int64) bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	p := &jsonPath{}
	startValue := func() {
		if n := len(p.frames); n > 0 {
			if top := &p.frames[n-1]; top.array {
				top.idx++
			}
		}
	}
	endValue := func() {
		if n := len(p.frames); n > 0 && !p.frames[n-1].array {
			p.frames[n-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		end := dec.InputOffset()
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				startValue()
				if fn(p.String(), false, "", end) {
					return
				}
				p.frames = append(p.frames, pathFrame{array: t == '[', idx: -1, expectKey: true})
			default:
				p.frames = p.frames[:len(p.frames)-1]
				endValue()
			}
		case string:
			if n := len(p.frames); n > 0 && !p.frames[n-1].array && p.frames[n-1].expectKey {
				p.frames[n-1].key = t
				p.frames[n-1].expectKey = false
				if fn(p.String(), true, t, end) {
					return
				}
				continue
			}
			startValue()
			if fn(p.String(), false, "", end) {
				return
			}
			endValue()
		default:
			startValue()
			if fn(p.String(), false, "", end) {
				return
			}
			endValue()
		}
	}
}

// pathAt is the wire path of the value that ends at byte offset off (encoding/json's
// UnmarshalTypeError.Offset), or "" when none does.
func pathAt(body []byte, off int64) string {
	var found string
	walkJSON(body, func(path string, isKey bool, _ string, end int64) bool {
		if !isKey && end >= off {
			found = path
			return true
		}
		return false
	})
	return found
}

// keyPathBefore is the path of the last key named name that ends at or before off (the
// decoder's offset when it met the unknown field), or name when there is none.
func keyPathBefore(body []byte, off int64, name string) string {
	found := name
	walkJSON(body, func(path string, isKey bool, key string, end int64) bool {
		if end > off {
			return true
		}
		if isKey && key == name {
			found = path
		}
		return false
	})
	return found
}

// ---- validation ----

// newValidator builds the one validator: required structs enabled, fields named by their
// json names.
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		if name == "" {
			return f.Name
		}
		return name
	})
	return v
}

// validateStruct runs the validate: tags of dst and returns a 400 listing every failure
// by wire path.
func (s *Server) validateStruct(dst any) error {
	err := s.validate.Struct(dst)
	if err == nil {
		return nil
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		return fmt.Errorf("validate %T: %w", dst, err) // a programming error: 500
	}
	fes := make([]*sharding.FieldError, len(ves))
	for i, fe := range ves {
		fes[i] = &sharding.FieldError{Field: wirePath(fe.Namespace()), Message: validationMessage(fe)}
	}
	return Invalid(slugInvalidRequest, "Invalid request", fes...)
}

// wirePath strips the root struct's name from a validator namespace:
// "TilesRequest.shape[2]" -> "shape[2]".
func wirePath(ns string) string {
	if _, rest, ok := strings.Cut(ns, "."); ok {
		return rest
	}
	return ns
}

// validationMessage says what a failed tag requires, in words.
func validationMessage(fe validator.FieldError) string {
	p := fe.Param()
	isList := fe.Kind() == reflect.Slice || fe.Kind() == reflect.Array || fe.Kind() == reflect.Map
	isString := fe.Kind() == reflect.String
	got := func() string {
		v := fe.Value()
		switch rv := reflect.ValueOf(v); rv.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			return fmt.Sprintf(" (it has %d)", rv.Len())
		case reflect.String:
			return fmt.Sprintf(" (got %q)", rv.String())
		case reflect.Pointer:
			if rv.IsNil() {
				return ""
			}
			return fmt.Sprintf(" (got %v)", rv.Elem().Interface())
		case reflect.Invalid:
			return ""
		}
		return fmt.Sprintf(" (got %v)", v)
	}
	switch fe.Tag() {
	case "required":
		return "is required"
	case "required_without":
		return fmt.Sprintf("is required when %s is absent", jsonNameOf(p))
	case "excluded_with":
		return fmt.Sprintf("must be absent when %s is given; give one of them", jsonNameOf(p))
	case "gte":
		if isList {
			return "must have at least " + p + " entries" + got()
		}
		return "must be >= " + p + got()
	case "gt":
		return "must be > " + p + got()
	case "lte":
		if isList {
			return "must have at most " + p + " entries" + got()
		}
		return "must be <= " + p + got()
	case "lt":
		return "must be < " + p + got()
	case "min":
		switch {
		case isList:
			return "must have at least " + p + " entries" + got()
		case isString:
			return "must be at least " + p + " characters long" + got()
		}
		return "must be >= " + p + got()
	case "max":
		switch {
		case isList:
			return "must have at most " + p + " entries" + got()
		case isString:
			return "must be at most " + p + " characters long" + got()
		}
		return "must be <= " + p + got()
	case "len":
		if isList {
			return "must have exactly " + p + " entries" + got()
		}
		return "must be exactly " + p + got()
	case "oneof":
		return "must be one of: " + p + got()
	case "unique":
		return "must not repeat a value"
	}
	return fmt.Sprintf("fails the %q rule%s", fe.Tag(), got())
}

// jsonNameOf maps a Go field name in a tag parameter to snake_case json ("ElementBytes"
// -> "element_bytes").
func jsonNameOf(goName string) string {
	var b strings.Builder
	for i, c := range goName {
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(c - 'A' + 'a')
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// checkQuery refuses query parameters other than allowed, naming each (what names
// the body that takes them).
func checkQuery(q url.Values, allowed []string, what string) error {
	var fes []*sharding.FieldError
	for k := range q {
		if !slices.Contains(allowed, k) {
			fes = append(fes, sharding.Fieldf(k, "unknown query parameter; %s takes %s", what, strings.Join(allowed, ", ")))
		}
	}
	if len(fes) > 0 {
		return Invalid(slugInvalidRequest, "Invalid request", fes...)
	}
	return nil
}

// readBody reads r's body (capped by limitBody), mapping the cap to 413.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, emptyBody()
	}
	if bb, ok := r.Body.(*bufferedBody); ok {
		if body, ok := bb.take(); ok {
			return body, nil
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyTooLarge(mbe.Limit)
		}
		return nil, NewProblem(http.StatusBadRequest, slugInvalidJSON, "Malformed JSON", "could not read the request body: %v", err)
	}
	return body, nil
}
