// Package franzgosuite holds franz-go at v1.21.5, whose own integration tests (pkg/kgo) scripts/franz_go_suite.py
// runs unchanged against raftlog and against Apache Kafka: `go test github.com/twmb/franz-go/pkg/kgo` from this
// module builds them from the module cache (the Go module proxy's copy, checked against go.sum).
package franzgosuite

import _ "github.com/twmb/franz-go/pkg/kgo"
