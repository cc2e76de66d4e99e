package api

// CheckpointRequest is POST /v1/checkpoint: a named checkpoint of the
// env's current state (its live episode's sandbox, disk tier).
type CheckpointRequest struct {
	EnvID string `msgpack:"env_id" json:"env_id"`
}

// CheckpointReply names the checkpoint. Bytes is what it counts against
// the server's byte limit (0 where the provider cannot say).
type CheckpointReply struct {
	Checkpoint   string `msgpack:"checkpoint" json:"checkpoint"`
	SnapshotKind string `msgpack:"snapshot_kind" json:"snapshot_kind"`
	Task         string `msgpack:"task" json:"task"`
	Step         int    `msgpack:"step" json:"step"`
	Bytes        int64  `msgpack:"bytes" json:"bytes"`
}

// CheckpointDeleteRequest is POST /v1/checkpoint/delete.
type CheckpointDeleteRequest struct {
	Checkpoints []string `msgpack:"checkpoints" json:"checkpoints"`
}

// CheckpointDeleteReply lists the checkpoints actually deleted.
type CheckpointDeleteReply struct {
	Deleted []string `msgpack:"deleted" json:"deleted"`
}

// CheckpointSpec is what /v1/spec says of named checkpoints: at most
// MaxCount live at once holding at most MaxBytes (over either is
// checkpoint_limit), each deleted after IdleTTLS seconds unused.
type CheckpointSpec struct {
	SnapshotKind string `msgpack:"snapshot_kind" json:"snapshot_kind"`
	MaxCount     int    `msgpack:"max_count" json:"max_count"`
	MaxBytes     int64  `msgpack:"max_bytes" json:"max_bytes"`
	IdleTTLS     int    `msgpack:"idle_ttl_s" json:"idle_ttl_s"`
}
