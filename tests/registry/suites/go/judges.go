//go:build tools

// Package judges names the package whose tests tests/registry/judges.py runs unchanged against a raftlog
// node (confluent-kafka-go's schemaregistry, TestClient), so that go.mod and go.sum pin it and its
// dependencies; the Go module proxy's copy of the module carries the tests.
package judges

import _ "github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
