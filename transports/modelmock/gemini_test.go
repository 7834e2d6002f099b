package modelmock

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func geminiPost(t *testing.T, url, body string) (*http.Response, []map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("x-goog-api-key", "mock-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var chunks []map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					t.Fatalf("a chunk is not JSON: %q", d)
				}
				chunks = append(chunks, m)
			}
		}
		return resp, chunks
	}
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return resp, []map[string]any{m}
}

// parts flattens the chunks' candidate parts.
func parts(chunks []map[string]any) (text string, calls []map[string]any, usage map[string]any) {
	for _, c := range chunks {
		for _, cand := range c["candidates"].([]any) {
			content := cand.(map[string]any)["content"].(map[string]any)
			for _, p := range content["parts"].([]any) {
				pm := p.(map[string]any)
				if s, ok := pm["text"].(string); ok {
					text += s
				}
				if fc, ok := pm["functionCall"].(map[string]any); ok {
					calls = append(calls, fc)
				}
			}
		}
		if u, ok := c["usageMetadata"].(map[string]any); ok {
			usage = u
		}
	}
	return text, calls, usage
}

func TestGeminiStream(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{Match: Match{Text: "write it"}, Steps: []Step{
		{Text: "writing", Chunks: 3, Tool: &ToolCall{Name: "write_file", Input: json.RawMessage(`{"file_path":"/w/a.txt","content":"hi"}`)}},
		{Text: "done: {{result}}"},
	}}}}
	s, err := Start(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	url := s.URL() + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
	first := `{"contents":[{"role":"user","parts":[{"text":"<session_context>ctx</session_context>"},{"text":"write it"}]}],
		"systemInstruction":{"parts":[{"text":"you are gemini"}]},"tools":[{"functionDeclarations":[{"name":"write_file"}]}]}`
	_, chunks := geminiPost(t, url, first)
	text, calls, usage := parts(chunks)
	if text != "writing" || len(calls) != 1 || calls[0]["name"] != "write_file" {
		t.Fatalf("text %q calls %v: want the step's text and its write_file call", text, calls)
	}
	if len(chunks) < 3 {
		t.Errorf("%d chunks: want the text in 3 chunks and the call with the finish", len(chunks))
	}
	if usage == nil || usage["totalTokenCount"].(float64) != 120 {
		t.Errorf("usageMetadata %v: want 100+20 tokens", usage)
	}
	id := calls[0]["id"].(string)
	second := `{"contents":[{"role":"user","parts":[{"text":"write it"}]},
		{"role":"model","parts":[{"functionCall":{"id":"` + id + `","name":"write_file","args":{"file_path":"/w/a.txt"}}}]},
		{"role":"user","parts":[{"functionResponse":{"id":"` + id + `","name":"write_file","response":{"output":"wrote /w/a.txt"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"write_file"}]}]}`
	_, chunks = geminiPost(t, url, second)
	if text, _, _ := parts(chunks); text != "done: wrote /w/a.txt" {
		t.Errorf("second step %q: want the result expanded into step 2", text)
	}
	trs := s.ToolResults()
	if len(trs) != 1 || trs[0].Content != "wrote /w/a.txt" || trs[0].ToolName != "write_file" || trs[0].IsError {
		t.Errorf("tool results %+v", trs)
	}
	for _, r := range s.Requests() {
		if r.Wire != "gemini" || r.Kind != KindMain || r.Header.Get("X-Goog-Api-Key") != "REDACTED" {
			t.Errorf("request %d: wire %q kind %q key %q", r.Seq, r.Wire, r.Kind, r.Header.Get("X-Goog-Api-Key"))
		}
	}
	if !s.Saw("write it") {
		t.Error("Saw misses the prompt")
	}
}

func TestGeminiErrorsAndSide(t *testing.T) {
	sc := &Scenario{Rules: []Rule{
		{Match: Match{Text: "busy"}, Steps: []Step{{Error: &ErrorStep{Status: 429}}}},
		{Match: Match{}, Times: 1, Steps: []Step{{Text: "the one main answer"}}},
	}}
	s, err := Start(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	base := s.URL() + "/v1beta/models/"
	resp, chunks := geminiPost(t, base+"gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"busy"}]}],"tools":[{"functionDeclarations":[{"name":"x"}]}]}`)
	if resp.StatusCode != 429 || chunks[0]["error"].(map[string]any)["status"] != "RESOURCE_EXHAUSTED" {
		t.Errorf("status %d body %v: want 429 RESOURCE_EXHAUSTED", resp.StatusCode, chunks)
	}
	// gemini-cli's session summary: a tool-less generateContent
	resp, chunks = geminiPost(t, base+"gemini-3.5-flash-lite:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"Summarize the user's primary intent or goal in this conversation in ONE sentence (max 80 characters)."}]}]}`)
	if text, _, _ := parts(chunks); resp.StatusCode != 200 || text == "" || text == "the one main answer" {
		t.Errorf("summary: %d %q: want a canned answer, not the scenario's", resp.StatusCode, text)
	}
	// the rule with Times 1 is still there for the main call
	_, chunks = geminiPost(t, base+"gemini-2.5-pro:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"x"}]}]}`)
	if text, _, _ := parts(chunks); text != "the one main answer" {
		t.Errorf("main after the side request: %q", text)
	}
	kinds := []Kind{}
	for _, r := range s.Requests() {
		kinds = append(kinds, r.Kind)
	}
	if len(kinds) != 3 || kinds[1] != KindSummary || kinds[2] != KindMain {
		t.Errorf("kinds %v: want main, summary, main", kinds)
	}
	resp, _ = geminiPost(t, base+"gemini-2.5-pro:countTokens", `{}`)
	if resp.StatusCode != 200 {
		t.Errorf("countTokens: %d", resp.StatusCode)
	}
}

// TestChatTitleIsSide: opencode's title request (no tools, a title
// generator system prompt) is answered without the scenario.
func TestChatTitleIsSide(t *testing.T) {
	sc := &Scenario{Rules: []Rule{{Match: Match{}, Times: 1, Steps: []Step{{Text: "main answer"}}}}}
	s, err := Start(t, sc)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) string {
		resp, err := http.Post(s.URL()+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	title := post(`{"model":"mock-model","messages":[{"role":"system","content":"You are a title generator. You output ONLY a thread title."},{"role":"user","content":"fix the bug"}]}`)
	if strings.Contains(title, "main answer") {
		t.Errorf("the title request used the scenario: %s", title)
	}
	main := post(`{"model":"mock-model","messages":[{"role":"user","content":"fix the bug"}],"tools":[{"type":"function","function":{"name":"bash"}}]}`)
	if !strings.Contains(main, "main answer") {
		t.Errorf("the main request: %s", main)
	}
	if r := s.Requests(); len(r) != 2 || r[0].Kind != KindTitle || r[1].Kind != KindMain {
		t.Errorf("kinds: %+v", r)
	}
}

func FuzzDecodeGemini(f *testing.F) {
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"hi"},{"functionResponse":{"name":"x","response":{"error":"no"}}}]}]}`))
	f.Add([]byte(`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"x","args":null}},{"text":"t","thought":true}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeGemini(b, "m", true)
		if err != nil {
			return
		}
		_ = c.view()
		_ = sideKind("gemini", c)
	})
}
