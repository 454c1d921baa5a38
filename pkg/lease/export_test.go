package lease

import "time"

// StepDownDeadline is the deadline Run computes for a term whose last
// proven send was at sent, exported for the monotonic-clock test.
func StepDownDeadline(ttl time.Duration, sent time.Time) time.Time {
	return (&lessee{ttl: ttl}).deadline(sent)
}
