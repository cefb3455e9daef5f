// Package strictjson decodes JSON documents written by people, more
// strictly than encoding/json and with errors that say where: every
// problem is an [*Error] with the line and column of the offending token
// and the path of the value (servers[2].gpus).
//
// On top of encoding/json's rules, [Decode] refuses: a key that appears
// twice in one object (encoding/json keeps the last silently); a key that
// names a struct field in another case ("GPU_TYPE" for "gpu_type":
// encoding/json matches keys case-insensitively); unknown keys; a value of
// the wrong JSON type; an integer that does not fit its field or has a
// fraction; a number that overflows its float type (1e400); null where the
// field cannot be null; a fixed-size array of the wrong length; trailing
// data after the document; an empty or truncated document; nesting deeper
// than 64 levels. A leading UTF-8 byte order mark is skipped.
//
// Values of types that implement json.Unmarshaler or
// encoding.TextUnmarshaler are checked by calling that method, so their
// errors are located too. The check is a single pass over the bytes that
// allocates little; encoding/json then fills the value. Decode is safe for
// concurrent use.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Error is a problem in a JSON document. It is plain data, safe to share.
type Error struct {
	// Line and Column locate the problem, from 1; Column counts
	// characters, not bytes.
	Line, Column int
	// Offset is the byte offset of the problem in the document (after a
	// byte order mark).
	Offset int64
	// Path names the value in question, as servers[2].gpus or
	// ["v100"]["null"]; empty for the document itself.
	Path string
	// Msg says what is wrong.
	Msg string
}

func (e *Error) Error() string { return e.Where() + ": " + e.Problem() }

// Where returns "line L, column C".
func (e *Error) Where() string { return fmt.Sprintf("line %d, column %d", e.Line, e.Column) }

// Problem returns the path and the message: what Error says after the
// location.
func (e *Error) Problem() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// maxDepth bounds the nesting of a document.
const maxDepth = 64

// Decode decodes the JSON document data into v, a non-nil pointer, with
// the checks of the package doc. On an error v may be partly filled.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic("strictjson: Decode needs a non-nil pointer")
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	w := &walker{data: data}
	if w.ws(); w.pos == len(data) {
		return w.errAt(0, "empty document")
	}
	if err := w.value(rv.Type().Elem(), 0); err != nil {
		return err
	}
	if w.ws(); w.pos < len(data) {
		return w.errAt(w.pos, "trailing data after the document")
	}
	if err := json.Unmarshal(data, v); err != nil {
		// The walk accepted what encoding/json refuses: locate what we can.
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return w.errAt(int(syn.Offset), "%v", err)
		case errors.As(err, &typ):
			return w.errAt(int(typ.Offset), "%v", err)
		}
		return w.errAt(0, "%v", err)
	}
	return nil
}

// position converts a byte offset of data to a line and column.
func position(data []byte, off int) (line, col int) {
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, 1 + utf8.RuneCount(before[start:])
}

// step is one step of the path to the current value: a struct field, a
// map key or an array index.
type step struct {
	key      []byte // raw key, between the quotes
	index    int
	isKey    bool
	isMapKey bool
}

type walker struct {
	data []byte
	pos  int
	path []step
	// keys holds, per depth, the keys of the map being read.
	keys [][]keyAt
	// checkers holds one value per type checked through UnmarshalJSON.
	checkers map[reflect.Type]json.Unmarshaler
}

// keyAt is a map key, decoded, and its offset.
type keyAt struct {
	key []byte
	at  int
}

func (w *walker) errAt(off int, format string, args ...any) *Error {
	off = min(max(off, 0), len(w.data))
	line, col := position(w.data, off)
	var p strings.Builder
	for i, s := range w.path {
		switch {
		case (s.isMapKey || s.isKey) && s.key == nil, !s.isMapKey && !s.isKey && s.index < 0:
			// between members: the problem is the container's
		case s.isMapKey:
			p.WriteString("[" + strconv.Quote(unquote(s.key)) + "]")
		case s.isKey:
			if i > 0 {
				p.WriteByte('.')
			}
			p.WriteString(unquote(s.key))
		default:
			p.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return &Error{Line: line, Column: col, Offset: int64(off), Path: p.String(), Msg: fmt.Sprintf(format, args...)}
}

// truncated reports the end of the data where more was needed.
func (w *walker) truncated() *Error {
	return w.errAt(len(w.data), "unexpected end of the document (truncated?)")
}

// unexpected reports the byte at the position, or the end of the data.
func (w *walker) unexpected(context string) *Error {
	if w.pos >= len(w.data) {
		return w.truncated()
	}
	r, _ := utf8.DecodeRune(w.data[w.pos:])
	return w.errAt(w.pos, "invalid character %s %s", quoteRune(r), context)
}

func quoteRune(r rune) string {
	if r == '\'' {
		return `'\''`
	}
	if r == '"' {
		return `'"'`
	}
	return strconv.QuoteRune(r)
}

// ws skips white space.
func (w *walker) ws() {
	for w.pos < len(w.data) {
		switch w.data[w.pos] {
		case ' ', '\t', '\r', '\n':
			w.pos++
			continue
		}
		return
	}
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	anyType             = reflect.TypeFor[any]()
)

// value checks the value at the position against type t and moves past it.
func (w *walker) value(t reflect.Type, depth int) error {
	if depth > maxDepth {
		return w.errAt(w.pos, "nested deeper than %d levels", maxDepth)
	}
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	w.ws()
	if w.pos >= len(w.data) {
		return w.truncated()
	}
	start := w.pos
	if t != anyType && reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := w.value(anyType, depth); err != nil {
			return err
		}
		u, ok := w.checkers[t]
		if !ok {
			if w.checkers == nil {
				w.checkers = map[reflect.Type]json.Unmarshaler{}
			}
			u = reflect.New(t).Interface().(json.Unmarshaler)
			w.checkers[t] = u
		}
		if err := u.UnmarshalJSON(w.data[start:w.pos]); err != nil {
			return w.errAt(start, "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return nil
	}
	mismatch := func(what string) error { return w.errAt(start, "%s where %s is wanted", what, want(t)) }
	switch c := w.data[w.pos]; {
	case c == 'n':
		if err := w.literal("null"); err != nil {
			return err
		}
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Interface:
			return nil
		}
		if nullable {
			return nil
		}
		return w.errAt(start, "null where %s is wanted", want(t))
	case c == 't' || c == 'f':
		lit := "true"
		if c == 'f' {
			lit = "false"
		}
		if err := w.literal(lit); err != nil {
			return err
		}
		if t.Kind() != reflect.Bool && t.Kind() != reflect.Interface {
			return mismatch("a boolean")
		}
		return nil
	case c == '"':
		raw, err := w.str()
		if err != nil {
			return err
		}
		if reflect.PointerTo(t).Implements(textUnmarshalerType) {
			if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(unquote(raw))); err != nil {
				return w.errAt(start, "%v", err)
			}
			return nil
		}
		switch t.Kind() {
		case reflect.String, reflect.Interface:
			return nil
		case reflect.Slice:
			if t.Elem().Kind() == reflect.Uint8 {
				return nil // encoding/json reads []byte as base64 text
			}
		}
		return mismatch("a string")
	case c == '-' || c >= '0' && c <= '9':
		num, err := w.number()
		if err != nil {
			return err
		}
		return w.checkNumber(num, start, t)
	case c == '{':
		switch t.Kind() {
		case reflect.Struct:
			return w.object(t, depth)
		case reflect.Map:
			return w.mapping(t.Elem(), depth)
		case reflect.Interface:
			return w.mapping(anyType, depth)
		}
		return mismatch("an object")
	case c == '[':
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			return w.array(t, start, depth)
		case reflect.Interface:
			return w.array(reflect.TypeFor[[]any](), start, depth)
		}
		return mismatch("an array")
	}
	return w.unexpected("looking for the beginning of a value")
}

// checkNumber checks that a number fits a field of type t.
func (w *walker) checkNumber(num []byte, start int, t reflect.Type) error {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(string(num), 10, t.Bits()); err != nil {
			return w.errAt(start, "%s is not an integer from %d to %d", num, -int64(1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if _, err := strconv.ParseUint(string(num), 10, t.Bits()); err != nil {
			return w.errAt(start, "%s is not an integer from 0 to %d", num, uint64(math.MaxUint64)>>(64-t.Bits()))
		}
	case reflect.Float32, reflect.Float64:
		if _, err := strconv.ParseFloat(string(num), t.Bits()); err != nil {
			return w.errAt(start, "%s is out of the range of a float%d", num, t.Bits())
		}
	case reflect.Interface:
	default:
		return w.errAt(start, "the number %s where %s is wanted", num, want(t))
	}
	return nil
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
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}

// literal reads true, false or null.
func (w *walker) literal(lit string) error {
	for i := range len(lit) {
		if w.pos >= len(w.data) {
			return w.truncated()
		}
		if w.data[w.pos] != lit[i] {
			return w.unexpected("in literal " + lit + " (expecting " + quoteRune(rune(lit[i])) + ")")
		}
		w.pos++
	}
	return nil
}

// str reads a string and returns it raw, between its quotes.
func (w *walker) str() ([]byte, error) {
	w.pos++ // the opening quote
	start := w.pos
	for w.pos < len(w.data) {
		switch c := w.data[w.pos]; {
		case c == '"':
			w.pos++
			return w.data[start : w.pos-1], nil
		case c == '\\':
			w.pos++
			if w.pos >= len(w.data) {
				return nil, w.truncated()
			}
			switch w.data[w.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				w.pos++
			case 'u':
				w.pos++
				for range 4 {
					if w.pos >= len(w.data) {
						return nil, w.truncated()
					}
					if !isHex(w.data[w.pos]) {
						return nil, w.unexpected("in \\u hexadecimal character escape")
					}
					w.pos++
				}
			default:
				return nil, w.unexpected("in string escape code")
			}
		case c < 0x20:
			return nil, w.unexpected("in string literal")
		default:
			w.pos++
		}
	}
	return nil, w.truncated()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// unquote decodes a raw string read by str.
func unquote(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	var s string
	_ = json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) // str checked the escapes
	return s
}

// number reads a number as JSON writes it.
func (w *walker) number() ([]byte, error) {
	start := w.pos
	digits := func() error {
		if w.pos >= len(w.data) {
			return w.truncated()
		}
		if c := w.data[w.pos]; c < '0' || c > '9' {
			return w.unexpected("in numeric literal")
		}
		for w.pos < len(w.data) && w.data[w.pos] >= '0' && w.data[w.pos] <= '9' {
			w.pos++
		}
		return nil
	}
	if w.data[w.pos] == '-' {
		w.pos++
	}
	if w.pos < len(w.data) && w.data[w.pos] == '0' {
		w.pos++
	} else if err := digits(); err != nil {
		return nil, err
	}
	if w.pos < len(w.data) && w.data[w.pos] == '.' {
		w.pos++
		if err := digits(); err != nil {
			return nil, err
		}
	}
	if w.pos < len(w.data) && (w.data[w.pos] == 'e' || w.data[w.pos] == 'E') {
		w.pos++
		if w.pos < len(w.data) && (w.data[w.pos] == '+' || w.data[w.pos] == '-') {
			w.pos++
		}
		if err := digits(); err != nil {
			return nil, err
		}
	}
	return w.data[start:w.pos], nil
}

// array checks an array of t's elements.
func (w *walker) array(t reflect.Type, start, depth int) error {
	w.pos++ // [
	w.path = append(w.path, step{index: -1})
	defer func() { w.path = w.path[:len(w.path)-1] }()
	w.ws()
	n := 0
	if w.pos < len(w.data) && w.data[w.pos] == ']' {
		w.pos++
	} else {
		for {
			w.ws()
			if t.Kind() == reflect.Array && n == t.Len() {
				return w.errAt(w.pos, "more than %d values in the array", t.Len())
			}
			w.path[len(w.path)-1].index = n
			if err := w.value(t.Elem(), depth+1); err != nil {
				return err
			}
			w.path[len(w.path)-1].index = -1
			n++
			w.ws()
			if w.pos >= len(w.data) {
				return w.truncated()
			}
			if c := w.data[w.pos]; c == ']' {
				w.pos++
				break
			} else if c != ',' {
				return w.unexpected("after array element")
			}
			w.pos++
		}
	}
	if t.Kind() == reflect.Array && n != t.Len() {
		return w.errAt(start, "%d values where the array needs %d", n, t.Len())
	}
	return nil
}

// members reads the members of an object, calling f with each key (raw)
// and its offset; f reads the value.
func (w *walker) members(f func(key []byte, at int) error) error {
	w.pos++ // {
	w.ws()
	if w.pos < len(w.data) && w.data[w.pos] == '}' {
		w.pos++
		return nil
	}
	for {
		w.ws()
		if w.pos >= len(w.data) {
			return w.truncated()
		}
		if w.data[w.pos] != '"' {
			return w.unexpected("looking for the beginning of an object key string")
		}
		at := w.pos
		key, err := w.str()
		if err != nil {
			return err
		}
		w.ws()
		if w.pos >= len(w.data) {
			return w.truncated()
		}
		if w.data[w.pos] != ':' {
			return w.unexpected("after object key")
		}
		w.pos++
		if err := f(key, at); err != nil {
			return err
		}
		w.ws()
		if w.pos >= len(w.data) {
			return w.truncated()
		}
		if c := w.data[w.pos]; c == '}' {
			w.pos++
			return nil
		} else if c != ',' {
			return w.unexpected("after object key:value pair")
		}
		w.pos++
	}
}

// mapping checks an object read into a map of elem values: no key twice.
func (w *walker) mapping(elem reflect.Type, depth int) error {
	for len(w.keys) <= depth {
		w.keys = append(w.keys, nil)
	}
	keys := w.keys[depth][:0]
	w.path = append(w.path, step{isMapKey: true})
	defer func() { w.path = w.path[:len(w.path)-1] }()
	err := w.members(func(raw []byte, at int) error {
		key := raw
		if bytes.IndexByte(raw, '\\') >= 0 {
			key = []byte(unquote(raw))
		}
		keys = append(keys, keyAt{key, at})
		w.path[len(w.path)-1].key = raw
		err := w.value(elem, depth+1)
		w.path[len(w.path)-1].key = nil
		return err
	})
	w.keys[depth] = keys[:0]
	if err != nil || len(keys) < 2 {
		return err
	}
	// Sorting finds repeated keys without a set of strings; the stable
	// sort keeps each key's occurrences in order.
	slices.SortStableFunc(keys, func(a, b keyAt) int { return bytes.Compare(a.key, b.key) })
	dup := -1
	for i := 1; i < len(keys); i++ {
		if bytes.Equal(keys[i].key, keys[i-1].key) && (dup < 0 || keys[i].at < keys[dup].at) {
			dup = i
		}
	}
	if dup >= 0 {
		return w.errAt(keys[dup].at, "key %q appears twice in this object", keys[dup].key)
	}
	return nil
}

// object checks an object read into a struct: known keys, in their exact
// case, each once.
func (w *walker) object(t reflect.Type, depth int) error {
	fields := fieldsOf(t)
	var seen uint64
	var seenMore []bool
	if len(fields.names) > 64 {
		seenMore = make([]bool, len(fields.names))
	}
	w.path = append(w.path, step{isKey: true})
	defer func() { w.path = w.path[:len(w.path)-1] }()
	return w.members(func(raw []byte, at int) error {
		i, ok := fields.index[string(raw)]
		if !ok {
			key := unquote(raw)
			if i, ok = fields.index[key]; !ok {
				for _, name := range fields.names {
					if strings.EqualFold(name, key) {
						return w.errAt(at, "unknown field %q: field names are case-sensitive; did you mean %q?", key, name)
					}
				}
				return w.errAt(at, "unknown field %q (known: %s)", key, strings.Join(fields.names, ", "))
			}
		}
		dup := false
		if seenMore != nil {
			dup, seenMore[i] = seenMore[i], true
		} else {
			dup = seen&(1<<i) != 0
			seen |= 1 << i
		}
		if dup {
			return w.errAt(at, "field %q appears twice in this object", fields.names[i])
		}
		w.path[len(w.path)-1].key = raw
		err := w.value(fields.types[i], depth+1)
		w.path[len(w.path)-1].key = nil
		return err
	})
}

type structFields struct {
	index map[string]int
	names []string // sorted
	types []reflect.Type
}

var fieldCache sync.Map // reflect.Type -> *structFields

// fieldsOf lists the JSON names of t's exported fields, as encoding/json
// names them (the tag's name, else the field's), promoting the fields of
// embedded structs without a tag.
func fieldsOf(t reflect.Type) *structFields {
	if v, ok := fieldCache.Load(t); ok {
		return v.(*structFields)
	}
	types := map[string]reflect.Type{}
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
			if _, dup := types[name]; !dup {
				types[name] = f.Type
			}
		}
	}
	walk(t)
	sf := &structFields{index: map[string]int{}}
	for name := range types {
		sf.names = append(sf.names, name)
	}
	slices.Sort(sf.names)
	for i, name := range sf.names {
		sf.index[name] = i
		sf.types = append(sf.types, types[name])
	}
	fieldCache.Store(t, sf)
	return sf
}
