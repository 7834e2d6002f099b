package messages

import "time"

// Granularity says how finely a backend reports a turn.
type Granularity string

const (
	GranularityStream  Granularity = "stream"
	GranularityPerTurn Granularity = "per-turn"
)

// ResumeKind says how a backend resumes a session.
type ResumeKind string

const (
	ResumeNative   ResumeKind = "native"
	ResumeThreadID ResumeKind = "thread-id"
	ResumeNone     ResumeKind = "none"
)

// ModelSelection says when a backend's model can be chosen.
type ModelSelection string

const (
	ModelPerTurn    ModelSelection = "per-turn"
	ModelPerSession ModelSelection = "per-session"
	ModelFixed      ModelSelection = "none"
)

// EffortSupport says whether and when effort can be set.
type EffortSupport string

const (
	EffortNone    EffortSupport = "none"
	EffortAtStart EffortSupport = "start"
	EffortPerTurn EffortSupport = "per-turn"
)

// CostProfile frames what a session costs.
type CostProfile string

const (
	CostSubscription CostProfile = "subscription"
	CostMetered      CostProfile = "api-metered"
	CostInternal     CostProfile = "internal"
	CostFree         CostProfile = "free"
)

// LiveControls says which controls work while a session runs.
type LiveControls struct {
	Interrupt  bool        `json:"interrupt" msgpack:"interrupt"`
	SetPosture bool        `json:"setPosture" msgpack:"setPosture"`
	GuideModes []GuideMode `json:"guideModes" msgpack:"guideModes"`
}

// ExternalAttach is the backend's own interactive resume command;
// {sessionId} and {cwd} are filled from the record.
type ExternalAttach struct {
	CommandTemplate string `json:"commandTemplate" msgpack:"commandTemplate"`
	Note            string `json:"note,omitempty" msgpack:"note,omitempty"`
}

// Descriptor is a backend's static capability descriptor: every column of
// the capability matrix.
type Descriptor struct {
	ID             string             `json:"id" msgpack:"id"`
	DisplayName    string             `json:"displayName" msgpack:"displayName"`
	Scripted       bool               `json:"scripted,omitempty" msgpack:"scripted,omitempty"`
	ProcessModel   string             `json:"processModel" msgpack:"processModel"`
	Protocol       string             `json:"protocol" msgpack:"protocol"`
	Granularity    Granularity        `json:"granularity" msgpack:"granularity"`
	ClarifySupport bool               `json:"clarifySupport" msgpack:"clarifySupport"`
	HonorsAllowed  bool               `json:"honorsAllowedTools" msgpack:"honorsAllowedTools"`
	Resume         ResumeKind         `json:"resume" msgpack:"resume"`
	ModelSelection ModelSelection     `json:"modelSelection" msgpack:"modelSelection"`
	EffortSupport  EffortSupport      `json:"effortSupport" msgpack:"effortSupport"`
	EffortMap      map[Effort]string  `json:"effortMap,omitempty" msgpack:"effortMap,omitempty"`
	ModelClassMap  map[string]string  `json:"modelClassMap,omitempty" msgpack:"modelClassMap,omitempty"`
	PostureMap     map[Posture]string `json:"postureMap" msgpack:"postureMap"`
	EditToolNames  []string           `json:"editToolNames" msgpack:"editToolNames"`
	Live           LiveControls       `json:"liveControls" msgpack:"liveControls"`
	Cost           CostProfile        `json:"costProfile" msgpack:"costProfile"`
	Strengths      []string           `json:"strengths,omitempty" msgpack:"strengths,omitempty"`
	Weaknesses     []string           `json:"weaknesses,omitempty" msgpack:"weaknesses,omitempty"`
	BriefingNotes  string             `json:"briefingNotes,omitempty" msgpack:"briefingNotes,omitempty"`
	ExternalAttach *ExternalAttach    `json:"externalAttach,omitempty" msgpack:"externalAttach,omitempty"`
	CLIVersion     string             `json:"cliVersion,omitempty" msgpack:"cliVersion,omitempty"`
	// Gate says how the seed 002 workspace gate applies to the backend's
	// file tools: GateTools (it opens every path through the gate),
	// GateQuestions (its permission questions about files pass the gate
	// before anyone is asked), or GateNone.
	Gate GateScope `json:"gate,omitempty" msgpack:"gate,omitempty"`
	// Containment is how this host contains the backend's processes; the
	// runtime fills it in.
	Containment *Containment `json:"containment,omitempty" msgpack:"containment,omitempty"`
}

// GateScope says how the workspace gate applies to a backend.
type GateScope string

// Gate scopes.
const (
	GateTools     GateScope = "tools"
	GateQuestions GateScope = "questions"
	GateNone      GateScope = "none"
)

// Containment is how the runtime contains a backend's processes on this
// host: each line is what holds, or why it does not.
type Containment struct {
	// Watchdog: every process starts under a watchdog that kills its
	// process group when the runtime dies.
	Watchdog bool `json:"watchdog" msgpack:"watchdog"`
	// Cgroup is the per-session cgroup v2 support, or why there is none.
	Cgroup string `json:"cgroup" msgpack:"cgroup"`
	// Shell is how commands the runtime's own shell runs are confined.
	Shell string `json:"shell,omitempty" msgpack:"shell,omitempty"`
	// TurnWallClock is the per-turn limit the runtime enforces (0: none).
	TurnWallClock Duration `json:"turnWallClock" msgpack:"turnWallClock"`
	// Env is the environment policy.
	Env string `json:"env" msgpack:"env"`
	// Filesystem is the Landlock confinement of the backend's whole process
	// tree on this host, or why there is none.
	Filesystem string `json:"filesystem,omitempty" msgpack:"filesystem,omitempty"`
	// Network is the network confinement that holds on this host.
	Network string `json:"network,omitempty" msgpack:"network,omitempty"`
	// StateDirs are the folders (and files) of the CLI's own state its
	// processes may write besides the workspace and their TMPDIR, "~/"
	// meaning the session's HOME: the backend declares them.
	StateDirs []string `json:"stateDirs,omitempty" msgpack:"stateDirs,omitempty"`
	// ListsHome: the CLI lists HOME itself, which Landlock cannot allow
	// while it denies reads of a path in it (~/.ssh), so the runtime runs
	// it in a HOME of its own holding links to its StateDirs (and the
	// user's git config), where nothing is denied.
	ListsHome bool `json:"listsHome,omitempty" msgpack:"listsHome,omitempty"`
}

// SupportsGuideMode reports whether the backend accepts guidance in mode m.
// Queue is always supported: it needs nothing of the backend.
func (d *Descriptor) SupportsGuideMode(m GuideMode) bool {
	if m == GuideQueue {
		return true
	}
	for _, x := range d.Live.GuideModes {
		if x == m {
			return true
		}
	}
	return false
}

// Availability is the result of a backend's live probe.
type Availability struct {
	Available bool      `json:"available" msgpack:"available"`
	Version   string    `json:"version,omitempty" msgpack:"version,omitempty"`
	Binary    string    `json:"binary,omitempty" msgpack:"binary,omitempty"`
	Reason    string    `json:"reason,omitempty" msgpack:"reason,omitempty"`
	CheckedAt time.Time `json:"checkedAt" msgpack:"checkedAt"`
}

// BackendListing is one row of list-backends.
type BackendListing struct {
	Descriptor   Descriptor   `json:"descriptor" msgpack:"descriptor"`
	Availability Availability `json:"availability" msgpack:"availability"`
	TrackRecord  []string     `json:"trackRecord,omitempty" msgpack:"trackRecord,omitempty"`
	// RoutingGuidance is advisory model and effort routing text (seed 000 §10).
	RoutingGuidance []string `json:"routingGuidance,omitempty" msgpack:"routingGuidance,omitempty"`
	// LessonBlock is the low-trust lesson block for a dispatch to this
	// backend, to append to a driver's first message; "" when none qualifies.
	LessonBlock string `json:"lessonBlock,omitempty" msgpack:"lessonBlock,omitempty"`
}
