// Package strictjson decodes JSON documents written by people, more
// strictly than encoding/json and with errors that say where: every
// problem is an [*Error] with the line and column of the offending token.
//
// On top of encoding/json's rules, [Decode] refuses: a key that appears
// twice in one object (encoding/json keeps the last silently), including
// two keys of a struct that differ only in case; a key that names a struct
// field in another case ("GPU_TYPE" for "gpu_type": encoding/json matches
// keys case-insensitively); unknown keys; a value of the wrong JSON type;
// an integer that does not fit its field or has a fraction; a number that
// overflows float64 (1e400); null where the field cannot be null; a fixed
// array of the wrong length; trailing data after the document; an empty
// or truncated document. A leading UTF-8 byte order mark is skipped.
//
// Values of types that implement json.Unmarshaler or
// encoding.TextUnmarshaler are checked by calling that method, so their
// errors are located too. Decode is safe for concurrent use.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Error is a problem in a JSON document.
type Error struct {
	// Line and Column locate the problem, from 1; Column counts
	// characters, not bytes.
	Line, Column int
	// Offset is the byte offset of the problem in the document (after a
	// byte order mark).
	Offset int64
	// Msg says what is wrong.
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg) }

// Where returns "line L, column C".
func (e *Error) Where() string { return fmt.Sprintf("line %d, column %d", e.Line, e.Column) }

// Decode decodes the JSON document data into v, a non-nil pointer, with
// the checks of the package doc. On an error v may be partly filled.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("strictjson: Decode needs a non-nil pointer")
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	w := &walker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	if w.skip() == int64(len(data)) {
		return w.errAt(0, "empty document")
	}
	if err := w.value(rv.Type().Elem(), 0); err != nil {
		return err
	}
	if pos := w.skip(); pos < int64(len(data)) {
		return w.errAt(pos, "trailing data after the document")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		// The walk accepted what encoding/json refuses: locate what we can.
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return w.errAt(syn.Offset, "%v", err)
		case errors.As(err, &typ):
			return w.errAt(typ.Offset, "%v", err)
		}
		return w.errAt(0, "%v", err)
	}
	return nil
}

// position converts a byte offset of data to a line and column.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[start:])
}

type walker struct {
	data []byte
	dec  *json.Decoder
}

func (w *walker) errAt(off int64, format string, args ...any) *Error {
	off = min(max(off, 0), int64(len(w.data)))
	line, col := position(w.data, off)
	return &Error{Line: line, Column: col, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// skip returns the offset of the next token: past white space and the
// separators the decoder has not consumed yet.
func (w *walker) skip() int64 {
	off := w.dec.InputOffset()
	for off < int64(len(w.data)) {
		switch w.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// token reads the next token and its offset, turning the decoder's
// errors into located ones.
func (w *walker) token() (json.Token, int64, error) {
	pos := w.skip()
	tok, err := w.dec.Token()
	if err == nil {
		return tok, pos, nil
	}
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return nil, pos, w.errAt(max(syn.Offset-1, pos), "%s", strings.TrimPrefix(syn.Error(), "json: "))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, int64(len(w.data)), w.errAt(int64(len(w.data)), "unexpected end of the document (truncated?)")
	}
	return nil, pos, w.errAt(pos, "%v", err)
}

// maxDepth bounds the nesting the walk follows.
const maxDepth = 64

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// describe names a JSON token's type for messages.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "the number " + v.String()
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}

// value checks the next value against type t.
func (w *walker) value(t reflect.Type, depth int) error {
	if depth > maxDepth {
		return w.errAt(w.skip(), "nested deeper than %d levels", maxDepth)
	}
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return w.custom(t)
	}
	tok, pos, err := w.token()
	if err != nil {
		return err
	}
	if tok == nil {
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Interface:
			return nil
		}
		if nullable {
			return nil
		}
		return w.errAt(pos, "null where %s is wanted", want(t))
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		s, ok := tok.(string)
		if !ok {
			return w.errAt(pos, "%s where a string is wanted", describe(tok))
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return w.errAt(pos, "%v", err)
		}
		return nil
	}
	return w.rest(tok, pos, t, depth)
}

// rest checks a value whose first token is read.
func (w *walker) rest(tok json.Token, pos int64, t reflect.Type, depth int) error {
	mismatch := func() error { return w.errAt(pos, "%s where %s is wanted", describe(tok), want(t)) }
	switch t.Kind() {
	case reflect.Struct:
		if tok != json.Delim('{') {
			return mismatch()
		}
		return w.object(t, depth)
	case reflect.Map:
		if tok != json.Delim('{') {
			return mismatch()
		}
		return w.mapping(t, depth)
	case reflect.Slice, reflect.Array:
		if tok != json.Delim('[') {
			if s, ok := tok.(string); ok && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
				_ = s // encoding/json reads []byte from base64 text
				return nil
			}
			return mismatch()
		}
		n := 0
		for w.dec.More() {
			if t.Kind() == reflect.Array && n == t.Len() {
				return w.errAt(w.skip(), "more than %d values in the array", t.Len())
			}
			if err := w.value(t.Elem(), depth+1); err != nil {
				return err
			}
			n++
		}
		if _, _, err := w.token(); err != nil {
			return err
		}
		if t.Kind() == reflect.Array && n != t.Len() {
			return w.errAt(pos, "%d values where the array needs %d", n, t.Len())
		}
		return nil
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return mismatch()
		}
		return nil
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return mismatch()
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		num, ok := tok.(json.Number)
		if !ok {
			return mismatch()
		}
		if _, err := strconv.ParseInt(num.String(), 10, t.Bits()); err != nil {
			lo, hi := -int64(1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1
			return w.errAt(pos, "%s is not an integer from %d to %d", num, lo, hi)
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		num, ok := tok.(json.Number)
		if !ok {
			return mismatch()
		}
		if _, err := strconv.ParseUint(num.String(), 10, t.Bits()); err != nil {
			return w.errAt(pos, "%s is not an integer from 0 to %d", num, uint64(math.MaxUint64)>>(64-t.Bits()))
		}
		return nil
	case reflect.Float32, reflect.Float64:
		num, ok := tok.(json.Number)
		if !ok {
			return mismatch()
		}
		if _, err := strconv.ParseFloat(num.String(), t.Bits()); err != nil {
			return w.errAt(pos, "%s is out of the range of a float%d", num, t.Bits())
		}
		return nil
	case reflect.Interface:
		return w.any(tok, pos, depth)
	}
	return w.errAt(pos, "cannot decode into %s", t)
}

// want names what a Go type expects in JSON.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// any checks duplicate keys in a value of any shape.
func (w *walker) any(tok json.Token, pos int64, depth int) error {
	switch tok {
	case json.Delim('{'):
		return w.mapping(reflect.TypeFor[map[string]any](), depth)
	case json.Delim('['):
		return w.rest(tok, pos, reflect.TypeFor[[]any](), depth)
	}
	return nil
}

// custom checks a value through its type's UnmarshalJSON.
func (w *walker) custom(t reflect.Type) error {
	pos := w.skip()
	var raw json.RawMessage
	// A fresh decoder from the value on locates its syntax errors.
	if err := json.NewDecoder(bytes.NewReader(w.data[pos:])).Decode(&raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return w.errAt(pos+max(syn.Offset-1, 0), "%s", strings.TrimPrefix(syn.Error(), "json: "))
		}
		return w.errAt(int64(len(w.data)), "unexpected end of the document (truncated?)")
	}
	if err := w.dec.Decode(&raw); err != nil {
		return w.errAt(pos, "%v", err)
	}
	if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
		return w.errAt(pos, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// mapping checks an object read into a map: no key twice.
func (w *walker) mapping(t reflect.Type, depth int) error {
	seen := map[string]bool{}
	for w.dec.More() {
		tok, pos, err := w.token()
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder allows only strings as keys
		if seen[key] {
			return w.errAt(pos, "key %q appears twice in this object", key)
		}
		seen[key] = true
		if err := w.value(t.Elem(), depth+1); err != nil {
			return err
		}
	}
	_, _, err := w.token()
	return err
}

// object checks an object read into a struct: known keys, in their exact
// case, each once.
func (w *walker) object(t reflect.Type, depth int) error {
	fields := fieldsOf(t)
	seen := map[string]bool{}
	for w.dec.More() {
		tok, pos, err := w.token()
		if err != nil {
			return err
		}
		key := tok.(string)
		f, ok := fields.byName[key]
		if !ok {
			for name := range fields.byName {
				if strings.EqualFold(name, key) {
					return w.errAt(pos, "unknown field %q: field names are case-sensitive; did you mean %q?", key, name)
				}
			}
			return w.errAt(pos, "unknown field %q (known: %s)", key, strings.Join(fields.names, ", "))
		}
		if seen[key] {
			return w.errAt(pos, "field %q appears twice in this object", key)
		}
		seen[key] = true
		if err := w.value(f, depth+1); err != nil {
			return err
		}
	}
	_, _, err := w.token()
	return err
}

type structFields struct {
	byName map[string]reflect.Type
	names  []string
}

var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf lists the JSON names of t's exported fields, as encoding/json
// names them (the tag's name, else the field's), promoting the fields of
// embedded structs without a tag.
func fieldsOf(t reflect.Type) *structFields {
	if v, ok := fieldCache.Load(t); ok {
		return v.(*structFields)
	}
	sf := &structFields{byName: map[string]reflect.Type{}}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := sf.byName[name]; !dup {
				sf.byName[name] = f.Type
				sf.names = append(sf.names, name)
			}
		}
	}
	walk(t)
	slices.Sort(sf.names)
	fieldCache.Store(t, sf)
	return sf
}
