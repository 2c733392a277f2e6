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

	// Of a hand-off: the digest of the membership it leaves (package
	// move's MembersDigest: its slots and their addresses), which names
	// where its keys were copied to, whatever that membership's version.
	Members string `json:"members,omitempty"`
	// Of a hand-off's copy: the digest of the membership its keys were
	// copied to: the one it left, without its slot and each peer that
	// said it was leaving too.
	Onto string `json:"onto,omitempty"`
}

// LastStep is the key mover's last report in log of step of move id:
// its success (a report with msg) or its failure (FailedMessage). ok is
// false when it has reported neither (yet).
func LastStep(log []byte, id int64, step, msg string) (last Step, ok bool) {
	return lastStep(log, step, msg, func(s Step) bool { return s.Move == id })
}

// LastHandOff is LastStep of a hand-off (step) of the membership id, or of
// a membership of another version with the same members (their digest):
// a pod whose mounted membership lagged behind the one published (the
// kubelet updates a volume up to a minute or more after its source)
// leaves an older version, which sends its keys where id does when its
// slots and their addresses are the same. Or its copy was made onto the
// members onto (their digest): a pod deleted before it was told of the
// membership without a slot handed off just before, which leaves that
// slot out too, as it says it is leaving, copies where a move from id to
// the membership without both sends the clients.
func LastHandOff(log []byte, id int64, members, onto, step, msg string) (last Step, ok bool) {
	return lastStep(log, step, msg, func(s Step) bool {
		return s.Move == id || (members != "" && s.Members == members) || (onto != "" && s.Onto == onto)
	})
}

func lastStep(log []byte, step, msg string, of func(Step) bool) (last Step, ok bool) {
	for s := range Lines[Step](log) {
		if of(s) && s.Step == step && (s.Msg == msg || s.Msg == FailedMessage) {
			last, ok = s, true
		}
	}
	return last, ok
}

// Failed tells whether s reports a failure.
func (s Step) Failed() bool { return s.Msg == FailedMessage }
