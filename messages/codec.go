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
func UnmarshalMsgpack(data []byte, v any) error {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("msgpack")
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeInvalid, "msgpack", err, "malformed msgpack body")
	}
	return nil
}
