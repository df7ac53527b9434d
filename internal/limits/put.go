package limits

// A batch put's memory is mostly not its wire bytes. A heap profile of 12
// concurrent batch puts of 1,000 base64 bodies of 64 KiB (issue 18,
// docs/benchmarks.md) found, per batch of 87 MB on the wire: the JSON
// strings as decoded (87 MB), the decoded bodies (65 MB), and four more
// copies of the bodies on the way into the embedded store: the store's
// own copy of each job (Job.Clone), its encoded record, the record in
// the Pebble batch, and the batch applied to the group commit (65 MB
// each). Charging the wire bytes alone let three such batches in under
// the default 256 MiB budget and they held 1.2 GB.

// putCopies is how many copies of a job's body a put holds at once on
// its way to the store, besides the wire bytes its body reader charged:
// the decoded body and the store's four.
const putCopies = 5

// putJobOverhead is what one job costs beside its body: the engine's and
// the store's job structs, record headers, keys and index entries.
const putJobOverhead = 1 << 10

// PutCost is what one job of a put, with a body of bodyLen bytes once
// decoded and an id of idLen bytes, will cost in memory on its way to the
// store, before any of it is allocated. Every front end charges it to the
// request's share of the bytes in flight (Charge.Take) before it hands
// the job to the engine; the bytes stay charged until the request is
// answered, since the copies live at least until the store has the job.
func PutCost(bodyLen, idLen int) int64 {
	return int64(bodyLen)*putCopies + putJobOverhead + int64(idLen)
}
