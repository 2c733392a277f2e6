package podlog

// Messages of the key mover's Step reports.
const (
	CopiedMessage  = "keys copied"
	SettledMessage = "keys settled"
	FailedMessage  = "moving keys failed"
)

// Step is the key mover's report of its server's part of one step of a
// move: Move is the plan's ID, Step its step, Server the server it moved
// the keys of (empty: none here). A FailedMessage carries Error.
type Step struct {
	Msg    string `json:"msg"`
	Move   int64  `json:"move"`
	Step   string `json:"step"`
	Server string `json:"server"`
	Error  string `json:"error,omitempty"`

	// Of a copy: the keys listed, those leaving the server, those copied,
	// those the new slot held already and those gone meanwhile.
	Listed  int `json:"listed,omitempty"`
	Leaving int `json:"leaving,omitempty"`
	Copied  int `json:"copied,omitempty"`
	Present int `json:"present,omitempty"`
	Gone    int `json:"gone,omitempty"`
	// Of a settle: the keys removed from their old slot, invalidated
	// (rewritten here after their copy) and removed uncopied.
	Removed     int `json:"removed,omitempty"`
	Invalidated int `json:"invalidated,omitempty"`
	Rewritten   int `json:"rewritten,omitempty"`
	Uncopied    int `json:"uncopied,omitempty"`

	Seconds float64 `json:"seconds,omitempty"`
}

// LastStep is the key mover's last report in log of step of move id:
// its success (a report with msg) or its failure (FailedMessage). ok is
// false when it has reported neither (yet).
func LastStep(log []byte, id int64, step, msg string) (last Step, ok bool) {
	for s := range Lines[Step](log) {
		if s.Move == id && s.Step == step && (s.Msg == msg || s.Msg == FailedMessage) {
			last, ok = s, true
		}
	}
	return last, ok
}

// Failed tells whether s reports a failure.
func (s Step) Failed() bool { return s.Msg == FailedMessage }
