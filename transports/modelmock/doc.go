// Package modelmock is the scripted model server that tests, the demo and
// the benchmarks start on 127.0.0.1 in place of a model vendor: real agent
// CLIs (and the SDKs) are pointed at it and get scripted answers.
//
// It owns the provider-neutral Scenario (what the model receives mapped
// to what it answers), the Conversation every wire decodes its requests
// into, the Server with its request log, and one encoder per wire. The
// Anthropic Messages wire, OpenAI Responses and
// Chat Completions (§2.5: POST /v1/responses, POST /v1/chat/completions)
// and Gemini (§3.3: POST /v1beta/models/{m}:streamGenerateContent?alt=sse
// and :generateContent, gemini.go) are served, each a file that decodes
// into a Conversation and encodes a Step, with the scenario, the picking
// and the recording shared.
//
// # Scenarios
//
// A scenario is data (ParseScenario, LoadScenario; Reference is the
// conventions of the reference mock: TOOL:WRITE <path> <text>, TOOL:BASH
// <cmd>, SLOW, PONG):
//
//	{"rules": [
//	  {"match": {"regex": "TOOL:WRITE (\\S+) (.*)"}, "steps": [
//	     {"tool": {"name": "Write", "input": {"file_path": "{{1}}", "content": "{{2}}\n"}}},
//	     {"text": "wrote {{1}}"}]},
//	  {"match": {"toolResult": "denied"}, "steps": [{"text": "understood"}]},
//	  {"match": {"text": "busy"}, "times": 1, "steps": [{"error": {"status": 529, "retryAfter": "1"}}]},
//	  {"match": {"text": "SLOW"}, "steps": [{"text": "one two three", "chunks": 3, "chunkDelay": "1s"}]}],
//	 "default": {"text": "PONG(model={{model}}): {{input}}"},
//	 "toolResultDefault": {"text": "TOOL_DONE: is_error={{is_error}} result={{result}}"}}
//
// A step is one model response: thinking, text and tool calls (streamed in
// that order, text and thinking in Chunks deltas with ChunkDelay between
// them, tool inputs as input_json_delta), or an HTTP error status with an
// optional Retry-After. Texts and tool inputs expand {{input}} (the
// prompt), {{model}}, {{result}}, {{is_error}} and {{tool}} (the last tool
// result) and {{0}}..{{n}} (the match's regular-expression groups).
//
// # How a request is answered
//
// The prompt is the last user text of the conversation (client reminders,
// text that starts with <system-reminder>, left out; a message Claude Code
// folds into a running turn counts as the newest user text). Then:
//
//  1. A request that ends with tool results and no new prompt: the first
//     tool-result rule (toolResult, toolResultRegex) matching the last
//     result's content answers; else the rule that answered the prompt
//     continues with its step k, k being the number of assistant messages
//     since the prompt; else ToolResultDefault (DefaultToolResultReply).
//  2. A new prompt: the first prompt rule (text, regex; an empty match
//     matches everything) not yet used Times times answers with its first
//     step; else Default (DefaultReply).
//
// Side requests are answered without the scenario and never count against
// it: connectivity probes (HEAD on any path, GET / and /api/hello), Claude
// Code's session title (a tool-less request with an output_config json
// schema: a JSON object for it), its auto/plan-mode safety classifier (a
// user text starting with <transcript>: "<block>no" at the stop
// sequence), its one-token model check after set_model, token counting,
// and (side.go) opencode's title call on Chat Completions (no tools, a
// title-generator system prompt) and gemini-cli's session summary and
// other tool-less generateContent helpers (KindSummary).
//
// # Recording
//
// Every request is recorded (Requests, MainRequests, ToolResults, Saw):
// method, path, query, headers with secrets (x-api-key, authorization and
// the like) redacted, body, what kind it was and which rule answered. A
// request is on record as soon as it is understood, before its answer
// streams; its Status is set when the answer is done. WithRequestHook sees
// each finished request (`codesession modelmock --log` writes them as JSON
// lines).
//
// # Concurrency and lifetime
//
// A Server's methods are safe for concurrent use; requests are served
// concurrently and the scenario's state (rule use counts) is under one
// mutex. Start's owner decides when it closes: a context, a test's
// Cleanup, or an explicit Close, which cuts open streams. A Scenario is
// read-only once served and may serve several servers.
//
// # Testing
//
// The tests drive the server with net/http and with the official Anthropic
// and OpenAI Go SDKs (github.com/anthropics/anthropic-sdk-go,
// github.com/openai/openai-go), which parse their streams strictly; the
// claude-code backend's tests run the real claude CLI against it, and the
// native backend's run its three providers against it.
package modelmock
