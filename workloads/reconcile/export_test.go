package reconcile

// SetBetweenReads makes j call f after reading a page of reservations from
// PostgreSQL and before reading their Redis hashes.
func SetBetweenReads(j *Job, f func()) { j.betweenReads = f }
