module raftlog.test/registryjudges

go 1.26.0

require github.com/confluentinc/confluent-kafka-go/v2 v2.11.1

require (
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/oauth2 v0.18.0 // indirect
	google.golang.org/appengine v1.6.8 // indirect
	google.golang.org/protobuf v1.33.0 // indirect
)
