// Package curation gives each project exactly the capabilities it needs
// (seed 000 §9): skills, MCP servers and instruction text from pinned
// sources only, scoped to one session, with owner approval gating anything
// that runs code here.
//
// The pipeline is pure data and files, beside the session start:
//
//	catalog (catalog.json, or <home>/capabilities.json; strict, validated pins)
//	  -> detection (rules over a bounded Tree of the project; profiles cached
//	     under <home>/project-profiles by a hash of what the rules read)
//	  -> trust gate (Ledger, <home>/approvals.json: T0/T1/T2R pass, T2/T3 need
//	     an approval of their exact pin; otherwise deferred and requested)
//	  -> plan (BuildPlan: per-backend files under <home>/sessions/<id>/provision,
//	     a transports.Provision the backend only reads)
//	  -> visibility (messages.Provision on the record; the launch Manifest).
//
// Where each backend takes a plan's skills (BuildPlan, backendWays; ACP's
// session/new has no skills field, so each way is the CLI's own):
//
//	claude-code  a plugin dir (--plugin-dir <provision>/claude-plugin)
//	codex        $CODEX_HOME/skills of its per-session CODEX_HOME
//	droid        $HOME/.factory/skills of its per-session HOME
//	opencode     skills.paths in OPENCODE_CONFIG_CONTENT (the session's config)
//	kilo         skills.paths in KILO_CONFIG_CONTENT
//	copilot, gemini, qwen: files under <provision>/skills that the appended
//	  instructions point at (a note on the record says so per skill). Their
//	  native folders are the repository's (never written to) and their
//	  config home's (~/.copilot/skills or $COPILOT_HOME/skills,
//	  $GEMINI_CLI_HOME/.gemini/skills, $QWEN_HOME/skills); pointing that home
//	  at the session needs the user's login and settings overlaid into it
//	  (as droid's HOME is), not done yet. copilot 1.0.102's --add-dir does
//	  not load the added directory's .github/skills under --acp.
//
// Curator.Resolve never fails a start: a missing catalog, an unreadable
// project or a skill that cannot be fetched is a note on the record. The
// refresh check (Check) reports newer upstream pins as data and never
// edits a pin. GitHubFetcher walks the GitHub Contents API at a commit sha
// and refuses hostile trees (symlinks, odd names, non-UTF-8, over 64 KiB).
//
// Concurrency: Catalog values are immutable after ParseCatalog; Ledger
// locks <home>/approvals.lock around every read-modify-write, so a daemon
// and the CLI may share a home; CachedFetcher is safe for concurrent use.
//
// Testing: MapTree is an in-memory Tree; GitHubFetcher.BaseURL points the
// fetcher at a loopback server (fetch_test.go serves hostile trees).
package curation
