// A Go client's scenarios (franz-go, from the Go module proxy) against whichever cluster the bootstrap
// servers name: run by tests/kafka_reference/test_differential.py, built once per run.
//
//	kafkareference SCENARIO BOOTSTRAP TOPIC [ARGUMENT]
//
// Each scenario prints one line "RESULT {json}" of what it observed; an error the scenario does not
// expect ends the run with exit code 1 and the error on stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const patience = 60 * time.Second

func main() {
	if len(os.Args) < 4 {
		fail(errors.New("usage: kafkareference SCENARIO BOOTSTRAP TOPIC [ARGUMENT]"))
	}
	scenario, seeds, topic := os.Args[1], strings.Split(os.Args[2], ","), os.Args[3]
	argument := ""
	if len(os.Args) > 4 {
		argument = os.Args[4]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*patience)
	defer cancel()
	var result map[string]any
	var err error
	switch scenario {
	case "produce-consume":
		result, err = produceConsume(ctx, seeds, topic, argument)
	case "group":
		result, err = group(ctx, seeds, topic, argument)
	case "admin":
		result, err = admin(ctx, seeds, topic)
	case "commit-loop": // until told to stop: its test's kills may outlast 4*patience on a loaded machine
		result, err = commitLoop(context.Background(), seeds, topic, argument)
	default:
		err = fmt.Errorf("unknown scenario %q", scenario)
	}
	if err != nil {
		fail(err)
	}
	out, _ := json.Marshal(result)
	fmt.Printf("RESULT %s\n", out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// create makes the topic (replication factor 3) and waits until every partition has a leader.
func create(ctx context.Context, seeds []string, topic string, partitions int32, configs map[string]*string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, partitions, 3, configs, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil && details[topic].Err == nil && len(details[topic].Partitions) == int(partitions) {
			led := true
			for _, p := range details[topic].Partitions {
				led = led && p.Leader >= 0 && p.Err == nil
			}
			if led {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s has no leaders after %s", topic, patience)
}

func codecOf(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", name)
}

func value(i int) []byte {
	return []byte(fmt.Sprintf("value-%d-%s", i, strings.Repeat("g", i%50)))
}

// produceConsume: an idempotent acks=all producer with the codec, 300 keyed records with headers to
// partition 0, then read back from the start.
func produceConsume(ctx context.Context, seeds []string, topic, codecName string) (map[string]any, error) {
	codec, err := codecOf(codecName)
	if err != nil {
		return nil, err
	}
	if err := create(ctx, seeds, topic, 1, nil); err != nil {
		return nil, err
	}
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	records := make([]*kgo.Record, 300)
	for i := range records {
		records[i] = &kgo.Record{
			Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("key-%d", i)), Value: value(i),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}},
		}
	}
	results := producer.ProduceSync(ctx, records...)
	producer.Close()
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	dense := true
	for i, r := range results {
		dense = dense && r.Record.Offset == int64(i)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(
		map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var read []*kgo.Record
	deadline := time.Now().Add(patience)
	for len(read) < 300 && time.Now().Before(deadline) {
		polled, cancel := context.WithTimeout(ctx, time.Second)
		fetches := consumer.PollFetches(polled)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) { read = append(read, r) })
	}
	same := len(read) == 300
	for i := 0; same && i < 300; i++ {
		r := read[i]
		same = r.Offset == int64(i) && string(r.Key) == fmt.Sprintf("key-%d", i) &&
			string(r.Value) == string(value(i)) && len(r.Headers) == 1 && string(r.Headers[0].Value) == fmt.Sprint(i)
	}
	return map[string]any{"dense_offsets_from_0": dense, "read": len(read), "read_as_written": same}, nil
}

// member is one consumer of the group: it records what it reads and holds, and commits after each poll.
type member struct {
	client *kgo.Client
	mu     sync.Mutex
	held   map[int32]bool
	done   chan struct{}
}

func balancerOf(name string) (kgo.GroupBalancer, error) {
	switch name {
	case "range":
		return kgo.RangeBalancer(), nil
	case "roundrobin":
		return kgo.RoundRobinBalancer(), nil
	case "sticky":
		return kgo.StickyBalancer(), nil
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), nil
	}
	return nil, fmt.Errorf("unknown balancer %q", name)
}

func newMember(ctx context.Context, seeds []string, topic, groupID string, balancer kgo.GroupBalancer,
	seen *sync.Map) (*member, error) {
	m := &member{held: map[int32]bool{}, done: make(chan struct{})}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range assigned[topic] {
				m.held[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx) // what was read of them, before another member takes them
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range revoked[topic] {
				delete(m.held, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range lost[topic] {
				delete(m.held, p)
			}
		}),
	)
	if err != nil {
		return nil, err
	}
	m.client = client
	go func() {
		defer close(m.done)
		for {
			fetches := client.PollFetches(ctx)
			if fetches.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fetches.EachRecord(func(r *kgo.Record) {
				count, _ := seen.LoadOrStore(string(r.Value), new(int))
				*(count.(*int))++
			})
			_ = client.CommitUncommittedOffsets(ctx)
			client.AllowRebalance()
		}
	}()
	return m, nil
}

func (m *member) holds() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

func (m *member) leave() {
	m.client.Close() // leaves the group, after committing nothing more (each poll committed)
	<-m.done
}

func produceSpread(ctx context.Context, seeds []string, topic string, each int, prefix string) error {
	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer producer.Close()
	var records []*kgo.Record
	for p := int32(0); p < 6; p++ {
		for i := 0; i < each; i++ {
			records = append(records, &kgo.Record{Topic: topic, Partition: p,
				Value: []byte(fmt.Sprintf("%s-%d-%d", prefix, p, i))})
		}
	}
	return producer.ProduceSync(ctx, records...).FirstErr()
}

func waitFor(condition func() bool) bool {
	deadline := time.Now().Add(patience)
	for !condition() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func countSeen(seen *sync.Map) (distinct, twice int) {
	seen.Range(func(_, count any) bool {
		distinct++
		if *(count.(*int)) > 1 {
			twice++
		}
		return true
	})
	return
}

// group: three members with the balancer read 600 records on 6 partitions once; one leaves, the two
// left take its partitions and read 60 more; the group's committed offsets are then the partitions' ends.
func group(ctx context.Context, seeds []string, topic, balancerName string) (map[string]any, error) {
	balancer, err := balancerOf(balancerName)
	if err != nil {
		return nil, err
	}
	if err := create(ctx, seeds, topic, 6, nil); err != nil {
		return nil, err
	}
	if err := produceSpread(ctx, seeds, topic, 100, "a"); err != nil {
		return nil, err
	}
	groupID := topic + "-group"
	seen := &sync.Map{}
	var members []*member
	for i := 0; i < 3; i++ {
		m, err := newMember(ctx, seeds, topic, groupID, balancer, seen)
		if err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	firstRead := waitFor(func() bool { d, _ := countSeen(seen); return d >= 600 })
	waitFor(func() bool { return members[0].holds() == 2 && members[1].holds() == 2 && members[2].holds() == 2 })
	shares := []int{members[0].holds(), members[1].holds(), members[2].holds()}
	sort.Ints(shares)
	members[2].leave()
	if err := produceSpread(ctx, seeds, topic, 10, "b"); err != nil {
		return nil, err
	}
	secondRead := waitFor(func() bool { d, _ := countSeen(seen); return d >= 660 })
	rebalanced := waitFor(func() bool { return members[0].holds()+members[1].holds() == 6 })
	members[0].leave()
	members[1].leave()
	_, twice := countSeen(seen)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fetched, err := adm.FetchOffsets(ctx, groupID)
	if err != nil {
		return nil, err
	}
	committed := make([]int64, 6)
	fetched.Each(func(o kadm.OffsetResponse) { committed[o.Partition] = o.At })
	described, err := adm.DescribeGroups(ctx, groupID)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"first_600_read": firstRead, "shares_of_three": shares, "after_a_leave_660_read": secondRead,
		"two_hold_all_six": rebalanced, "read_twice": twice, "committed": committed,
		"group_state": described[groupID].State,
	}, nil
}

// admin: create with a config, describe it, grow the topic, and the refusals the client names.
func admin(ctx context.Context, seeds []string, topic string) (map[string]any, error) {
	retention := "3600000"
	if err := create(ctx, seeds, topic, 2, map[string]*string{"retention.ms": &retention}); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	described := ""
	waitFor(func() bool { // a broker may learn a new topic's configs from its metadata a moment later
		configs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return false
		}
		config, err := configs.On(topic, nil)
		if err != nil {
			return false
		}
		for _, c := range config.Configs {
			if c.Key == "retention.ms" {
				described = c.MaybeValue() + " " + c.Source.String()
			}
		}
		return described != ""
	})
	grown, err := adm.UpdatePartitions(ctx, 4, topic)
	if err == nil {
		err = grown.Error()
	}
	if err != nil {
		return nil, err
	}
	lower, err := adm.UpdatePartitions(ctx, 3, topic)
	if err != nil {
		return nil, err
	}
	again, err := adm.CreateTopics(ctx, 1, 3, nil, topic) // each topic's own answer, not one error
	if err != nil {
		return nil, err
	}
	partitions := 0
	waitFor(func() bool { // a broker's metadata shows the growth a moment after it is answered
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			partitions = len(details[topic].Partitions)
		}
		return partitions == 4
	})
	return map[string]any{
		"retention_ms":            described,
		"partitions_after_growth": partitions,
		"grow_to_3":               errorName(lower.Error()),
		"create_again":            errorName(again[topic].Err),
	}, nil
}

func errorName(err error) string {
	var kafkaError *kerr.Error
	if errors.As(err, &kafkaError) {
		return kafkaError.Message
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// commitLoop: group ARGUMENT commits offsets 1, 2, 3... of partition 0 (OffsetCommit through kadm, retried
// as franz-go retries it), printing "COMMITTED n" after each commit it was told succeeded, and every tenth
// reads the group's offsets back (OffsetFetch); until a line on stdin. Its result: the last offset
// committed, every commit or read that failed, and every read below the last commit.
func commitLoop(ctx context.Context, seeds []string, topic, group string) (map[string]any, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	stop := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(stop)
	}()
	var last int64
	failures, behind := []string{}, []string{}
	for n := int64(1); ; n++ {
		select {
		case <-stop:
			return map[string]any{"committed": last, "failures": failures, "behind": behind}, nil
		default:
		}
		offsets := kadm.Offsets{}
		offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: n, LeaderEpoch: -1})
		committed, err := adm.CommitOffsets(ctx, group, offsets)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("commit %d: %v", n, err))
		} else {
			last = n
			fmt.Printf("COMMITTED %d\n", n)
		}
		if n%10 != 0 {
			continue
		}
		fetched, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = fetched.Error()
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("read after %d: %v", last, err))
		} else if offset, ok := fetched.Lookup(topic, 0); !ok || offset.At < last {
			behind = append(behind, fmt.Sprintf("read %d (found: %v) after %d", offset.At, ok, last))
		}
	}
}
