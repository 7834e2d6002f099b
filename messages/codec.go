package messages

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// MarshalMsgpack encodes v with the msgpack tags of this package. It is the
// one binary codec: the body of the remote envelope and of benchmarks.
func MarshalMsgpack(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("msgpack")
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, Wrap(CodeInternal, "msgpack", err, "encode failed")
	}
	return buf.Bytes(), nil
}

// UnmarshalMsgpack decodes data into v; a malformed body is an invalid error.
// The bodies come from other nodes, so a panic inside the decoder is one
// too: msgpack/v5.4.1 panics on a nil where a struct field such as a
// time.Time is (reflect.Value.IsNil on a struct; FuzzMsgpackDecode found
// it with 5 bytes).
func UnmarshalMsgpack(data []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Errorf(CodeInvalid, "msgpack", "malformed msgpack body: the decoder failed on it (%v)", p)
		}
	}()
	if err := checkLengths(data); err != nil {
		return Wrap(CodeInvalid, "msgpack", err, "malformed msgpack body")
	}
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("msgpack")
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeInvalid, "msgpack", err, "malformed msgpack body")
	}
	return nil
}

// maxDepth bounds how deep checkLengths follows nested arrays and maps.
const maxDepth = 256

// checkLengths walks every value of data and refuses an array or map that
// says it holds more elements than bytes are left: msgpack/v5 allocates a
// slice of the length a header states before reading its elements, so a
// five-byte array32 header asks for gigabytes (FuzzMsgpackDecode found it:
// the process ran out of memory). Every element takes at least a byte.
func checkLengths(data []byte) error {
	r := bytes.NewReader(data)
	d := msgpack.NewDecoder(r)
	for r.Len() > 0 {
		if err := checkValue(d, r, 0); err != nil {
			return err
		}
	}
	return nil
}

func checkValue(d *msgpack.Decoder, r *bytes.Reader, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	n, per := 0, 0
	switch {
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		if n, err = d.DecodeArrayLen(); err != nil {
			return err
		}
		per = 1
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		if n, err = d.DecodeMapLen(); err != nil {
			return err
		}
		per = 2
	default:
		return d.Skip()
	}
	if n < 0 {
		return nil // nil
	}
	if n > r.Len()/per {
		return fmt.Errorf("a header of %d elements with %d bytes left", n, r.Len())
	}
	for i := 0; i < n*per; i++ {
		if err := checkValue(d, r, depth+1); err != nil {
			return err
		}
	}
	return nil
}
