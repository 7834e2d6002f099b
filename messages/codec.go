package messages

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
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
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("msgpack")
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeInvalid, "msgpack", err, "malformed msgpack body")
	}
	return nil
}
