package move

// SetLeaving has f's pod say it is leaving, as its own hand-off does.
func SetLeaving(f *Follower) { f.leaving.Store(leavingForGood) }
