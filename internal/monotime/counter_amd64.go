package monotime

const haveCounter = true

// readCounter is RDTSC (counter_amd64.s).
func readCounter() uint64
