package native

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/codesession/codesession/messages"
)

// Decoding a Messages stream.
//
// The SDK decodes every event into MessageStreamEventUnion through its
// reflective decoder and Accumulate re-encodes each block when it stops:
// about a third of the agent loop's CPU (bench native's profile,
// bench/README.md), for the few fields the loop reads. streamEvent decodes
// those fields of the events a model's answer is made of (text, thinking
// and tool_use blocks, their deltas, the message's start and delta) with
// encoding/json into a small struct, and the SDK's own stream (ssestream:
// the SSE framing, ping, the error event as an *anthropic.Error) carries
// them. Anything else (another block or delta type, a block out of order,
// a field of an unexpected shape) hands the whole stream to the SDK: the
// events so far are replayed through its decoder and Accumulate, and the
// rest follow the same way, so the response is the SDK's
// (TestAnthropicStreamMatchesSDK holds both paths to the same results).

// streamEvent is one event of the stream: its data kept for the SDK's
// decoder, and the fields the fast path reads. fast is false when the
// event is not one the fast path knows.
type streamEvent struct {
	data []byte
	fast bool
	ev   fastEvent
}

// fastEvent is the part of an event the fast path reads.
type fastEvent struct {
	Type    string `json:"type"`
	Index   *int64 `json:"index"`
	Message *struct {
		Model      string            `json:"model"`
		StopReason string            `json:"stop_reason"`
		Content    []json.RawMessage `json:"content"`
		Usage      fastUsage         `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Citations json.RawMessage `json:"citations"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *fastUsage `json:"usage"`
}

// fastUsage is a usage object; a count absent or null is nil (a
// message_delta's usage overwrites only the counts it has).
type fastUsage struct {
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheWriteTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadTokens  *int64 `json:"cache_read_input_tokens"`
}

// UnmarshalJSON keeps the data and decodes what the fast path reads. It
// never fails: an event it cannot read is left to the SDK.
func (e *streamEvent) UnmarshalJSON(b []byte) error {
	e.data = append([]byte(nil), b...)
	e.fast = decodeFast(b, &e.ev) == nil && e.ev.known()
	return nil
}

// fastDecoder decodes events with one json.Decoder, whose decode and scan
// state (json.Unmarshal makes both afresh on every call: a third of an
// event's allocations) it keeps from event to event. in is the event
// being decoded: a Decoder reads a value no further than its end, so
// each event, reset in, is read whole and only it.
type fastDecoder struct {
	in  bytes.Reader
	dec *json.Decoder
}

// fastDecoders are the decoders not in use: a stream's events are decoded
// one at a time on its goroutine, so a session holds one at most.
var fastDecoders = sync.Pool{New: func() any {
	d := &fastDecoder{}
	d.dec = json.NewDecoder(&d.in)
	return d
}}

// decodeFast decodes b, one JSON value (the SDK's decoder checked it), into
// ev as json.Unmarshal would. The decoder goes back to the pool only after
// a decode that succeeded: one that failed may keep a read error, which a
// Decoder returns for every value after.
func decodeFast(b []byte, ev *fastEvent) error {
	d := fastDecoders.Get().(*fastDecoder)
	d.in.Reset(b)
	if err := d.dec.Decode(ev); err != nil {
		return err
	}
	if d.in.Len() != 0 || d.dec.More() {
		// not one value (never: the SDK's decoder checked it): read as
		// json.Unmarshal reads it, the decoder dropped
		*ev = fastEvent{}
		return json.Unmarshal(b, ev)
	}
	fastDecoders.Put(d)
	return nil
}

// known says whether the fast path reads everything of e that the SDK's
// Accumulate and the provider would.
func (e *fastEvent) known() bool {
	switch e.Type {
	case "message_start":
		return e.Message != nil && len(e.Message.Content) == 0
	case "message_delta":
		return e.Delta != nil && e.Usage != nil
	case "content_block_start":
		if e.Index == nil || e.ContentBlock == nil {
			return false
		}
		switch e.ContentBlock.Type {
		case "text":
			c := bytes.TrimSpace(e.ContentBlock.Citations)
			return len(c) == 0 || string(c) == "null" || string(c) == "[]"
		case "thinking":
			return true
		case "tool_use":
			// an object or none; the SDK keeps a null input as none
			in := e.ContentBlock.Input
			return len(in) == 0 || in[0] == '{'
		}
		return false
	case "content_block_delta":
		if e.Index == nil || e.Delta == nil {
			return false
		}
		switch e.Delta.Type {
		case "text_delta", "thinking_delta", "signature_delta", "input_json_delta":
			return true
		}
		return false
	case "content_block_stop":
		return e.Index != nil
	case "message_stop":
		return true
	}
	return false
}

// fastBlock is a content block as the fast path accumulates it: the
// fields of the SDK's ContentBlockUnion the provider reads.
type fastBlock struct {
	typ, text, thinking, signature, id, name string
	input                                    []byte
}

// streamDecoder accumulates one stream's answer: on the fast path while
// every event is known, then (from the first that is not) in the SDK's
// Message.
type streamDecoder struct {
	emit   func(delta)
	seen   [][]byte // the events' data so far, while on the fast path
	onSDK  bool
	acc    anthropic.Message
	model  string
	stop   string
	usage  messages.Usage
	blocks []fastBlock
}

// add takes the next event of the stream.
func (d *streamDecoder) add(e *streamEvent) error {
	if !d.onSDK && e.fast && d.fastAdd(&e.ev) {
		d.seen = append(d.seen, e.data)
		return nil
	}
	if !d.onSDK {
		// Hand over: what the fast path took, through the SDK, emitting
		// nothing again.
		d.onSDK = true
		for _, data := range d.seen {
			if err := d.sdkAdd(data, false); err != nil {
				return err
			}
		}
		d.seen = nil
	}
	return d.sdkAdd(e.data, true)
}

// fastAdd applies ev as Accumulate would; false (nothing applied) when
// the SDK would refuse it.
func (d *streamDecoder) fastAdd(ev *fastEvent) bool {
	switch ev.Type {
	case "message_start":
		m := ev.Message
		d.model, d.stop, d.blocks = m.Model, m.StopReason, d.blocks[:0]
		d.usage = messages.Usage{}
		setCount(&d.usage.InputTokens, m.Usage.InputTokens)
		setCount(&d.usage.OutputTokens, m.Usage.OutputTokens)
		setCount(&d.usage.CacheWriteTokens, m.Usage.CacheWriteTokens)
		setCount(&d.usage.CacheReadTokens, m.Usage.CacheReadTokens)
	case "message_delta":
		d.stop = ev.Delta.StopReason
		d.usage.OutputTokens = 0
		setCount(&d.usage.OutputTokens, ev.Usage.OutputTokens)
		setCount(&d.usage.InputTokens, ev.Usage.InputTokens)
		setCount(&d.usage.CacheWriteTokens, ev.Usage.CacheWriteTokens)
		setCount(&d.usage.CacheReadTokens, ev.Usage.CacheReadTokens)
	case "content_block_start":
		if *ev.Index != int64(len(d.blocks)) {
			return false
		}
		cb := ev.ContentBlock
		d.blocks = append(d.blocks, fastBlock{typ: cb.Type, text: cb.Text, thinking: cb.Thinking,
			signature: cb.Signature, id: cb.ID, name: cb.Name, input: cb.Input})
	case "content_block_delta":
		if *ev.Index < 0 || *ev.Index >= int64(len(d.blocks)) {
			return false
		}
		b := &d.blocks[*ev.Index]
		switch ev.Delta.Type {
		case "text_delta":
			b.text += ev.Delta.Text
			if ev.Delta.Text != "" {
				d.emit(delta{text: ev.Delta.Text})
			}
		case "thinking_delta":
			b.thinking += ev.Delta.Thinking
			if ev.Delta.Thinking != "" {
				d.emit(delta{thinking: true, text: ev.Delta.Thinking})
			}
		case "signature_delta":
			b.signature += ev.Delta.Signature
		case "input_json_delta":
			if p := ev.Delta.PartialJSON; p != "" {
				if string(b.input) == "{}" {
					b.input = []byte(p)
				} else {
					b.input = append(b.input, p...)
				}
			}
		}
	case "content_block_stop":
		if *ev.Index < 0 || *ev.Index >= int64(len(d.blocks)) {
			return false
		}
	}
	return true
}

func setCount(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// sdkAdd decodes data as the SDK's stream would and accumulates it,
// emitting its delta when emit is set.
func (d *streamDecoder) sdkAdd(data []byte, emit bool) error {
	var ev anthropic.MessageStreamEventUnion
	if err := json.Unmarshal(data, &ev); err != nil {
		return err
	}
	return accumulate(&d.acc, ev, func(dl delta) {
		if emit {
			d.emit(dl)
		}
	})
}

// accumulate adds ev to acc and emits its text or thinking delta: what
// the provider does with each event of the SDK's stream.
func accumulate(acc *anthropic.Message, ev anthropic.MessageStreamEventUnion, emit func(delta)) error {
	if err := acc.Accumulate(ev); err != nil {
		return err
	}
	if ev.Type == "content_block_delta" {
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				emit(delta{text: ev.Delta.Text})
			}
		case "thinking_delta":
			if ev.Delta.Thinking != "" {
				emit(delta{thinking: true, text: ev.Delta.Thinking})
			}
		}
	}
	return nil
}

// response is the answer accumulated.
func (d *streamDecoder) response() response {
	if d.onSDK {
		return sdkResponse(&d.acc)
	}
	resp := response{stop: d.stop, model: d.model, usage: d.usage}
	for _, b := range d.blocks {
		switch b.typ {
		case "text":
			resp.blocks = append(resp.blocks, block{kind: blockText, text: b.text})
		case "thinking":
			resp.blocks = append(resp.blocks, block{kind: blockThinking, text: b.thinking, signature: b.signature})
		case "tool_use":
			resp.blocks = append(resp.blocks, block{kind: blockToolUse, id: b.id, name: b.name, input: orEmptyObject(b.input)})
		}
	}
	return resp
}

// sdkResponse is the SDK's accumulated Message as a response.
func sdkResponse(acc *anthropic.Message) response {
	resp := response{stop: string(acc.StopReason), model: string(acc.Model), usage: messages.Usage{
		InputTokens:      acc.Usage.InputTokens,
		OutputTokens:     acc.Usage.OutputTokens,
		CacheReadTokens:  acc.Usage.CacheReadInputTokens,
		CacheWriteTokens: acc.Usage.CacheCreationInputTokens,
	}}
	for _, cb := range acc.Content {
		switch cb.Type {
		case "text":
			resp.blocks = append(resp.blocks, block{kind: blockText, text: cb.Text})
		case "thinking":
			resp.blocks = append(resp.blocks, block{kind: blockThinking, text: cb.Thinking, signature: cb.Signature})
		case "tool_use":
			resp.blocks = append(resp.blocks, block{kind: blockToolUse, id: cb.ID, name: cb.Name, input: orEmptyObject(cb.Input)})
		default:
			if raw := cb.RawJSON(); raw != "" {
				resp.blocks = append(resp.blocks, block{kind: blockOpaque, raw: json.RawMessage(raw), rawOwner: ProviderAnthropic})
			}
		}
	}
	return resp
}

// decodeStream reads st to its end into a response, emitting the deltas
// as they come.
func decodeStream(st *ssestream.Stream[streamEvent], emit func(delta)) (response, error) {
	d := &streamDecoder{emit: emit}
	for st.Next() {
		ev := st.Current()
		if err := d.add(&ev); err != nil {
			return response{}, err
		}
	}
	if err := st.Err(); err != nil {
		return response{}, err
	}
	return d.response(), nil
}
