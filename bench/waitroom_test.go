package bench_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/bench"
)

// TestWaitingRoom runs the waiting room's scenario small against the real
// binary: 300 guests join a room for 20 rooms before the start, 50 of them
// on the stream (under the server's cap of streams per address) and the
// rest polling; the 20 admitted buy, nothing is oversold, and every other
// guest is told sold_out, the streamers pushed within a moment of each other.
func TestWaitingRoom(t *testing.T) {
	const waiters, streams, rooms = 300, 50, 20
	c := MustServe(t)
	rep, err := bench.RunWaitingRoom(t.Context(), bench.WaitRoom{Client: c, Waiters: waiters, Streams: streams, Stock: rooms,
		Rate: 50, Conns: 64, Lead: time.Second, FirstPoll: time.Second, Users: "wr-", Drain: 10 * time.Second, Metrics: c.Base + "/metrics"})
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range rep.Invariants {
		if !inv.OK {
			t.Fatalf("invariant %s broken: %s (all: %+v)", inv.Name, inv.Detail, rep.Invariants)
		}
	}
	if rep.Join.Created != waiters || rep.Join.PerSecond <= 0 || rep.Join.P99 <= 0 || rep.Join.P99 > rep.Join.Max {
		t.Errorf("join %+v: want %d placed, a rate and a latency", rep.Join, waiters)
	}
	if rep.Streams != streams || rep.StreamsRefused != 0 || rep.Pollers != waiters-streams || rep.Polls == 0 {
		t.Errorf("%d streams (%d refused), %d pollers, %d polls: want %d and %d, each poller polling",
			rep.Streams, rep.StreamsRefused, rep.Pollers, rep.Polls, streams, waiters-streams)
	}
	if rep.Admitted != rooms || rep.Refused != 0 || rep.Bought != rooms || rep.Check.Held+rep.Check.Sold != rooms || rep.Check.Oversold != 0 {
		t.Errorf("%d admitted, %d bought, %d refused; books %+v: want exactly the %d rooms", rep.Admitted, rep.Bought, rep.Refused, rep.Check, rooms)
	}
	// Every guest without a room heard sold_out: the streamers pushed
	// (SoldOut and FanOut count them), the pollers at a poll.
	if told := rep.SoldOut.Count + rep.PollSoldOut.Count; told != waiters-rooms || rep.NeverTold != 0 || rep.Failed != 0 {
		t.Errorf("%d streamers and %d pollers told sold out, %d never, %d failed: want all %d without a room",
			rep.SoldOut.Count, rep.PollSoldOut.Count, rep.NeverTold, rep.Failed, waiters-rooms)
	}
	if rep.SoldOut.Count == 0 || rep.FanOut.Count != rep.SoldOut.Count || rep.FanOut.Max > 1000 || rep.SoldOut.Max > 1000 {
		t.Errorf("sold out: from the last room %+v, fan-out %+v: want every waiting streamer told within 1 s", rep.SoldOut, rep.FanOut)
	}
	// The ETA is the server's to keep (the report says how often it rose);
	// the bench must have followed it past the draw.
	if e := rep.ETA; e.Followed == 0 || e.Rose > e.Followed || e.RoseFraction != float64(e.Rose)/float64(e.Followed) {
		t.Errorf("eta %+v: want it read after the draw, and the fraction that rose", e)
	}
	if q := rep.Queue; q == nil || q.Joined != waiters || q.Used != rooms || !q.SoldOut {
		t.Errorf("the server's queue %+v: want %d joined, %d admissions used, sold out", q, waiters, rooms)
	}
	if len(rep.Memory) != 4 || rep.Memory[0].RSSMiB <= 0 || rep.MemMissing != "" {
		t.Errorf("memory %+v (%s): want the server's at four phases", rep.Memory, rep.MemMissing)
	}
}

// TestWaitingRoomFlags: the flags the waiting room's scenario cannot take
// are refused before anything runs.
func TestWaitingRoomFlags(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"FLASHSALE_ADMIN_TOKEN": "a", "FLASHSALE_JWT_SECRET": "s"}[k]
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--streams", "5"}, "--streams and --admit-rate are --waiting-room's"},
		{[]string{"--waiting-room", "10", "--shape", "burst"}, "--shape does not go with --waiting-room"},
		{[]string{"--waiting-room", "10", "--compare"}, "--compare does not go with --waiting-room"},
		{[]string{"--waiting-room", "10", "--html", "x.html"}, "--html does not go with --waiting-room"},
		{[]string{"--waiting-room", "10", "--stock", "0"}, "at least one room"},
		{[]string{"--waiting-room", "10", "--admit-rate", "0"}, "--admit-rate is 0.1 to 100000"},
		{[]string{"--waiting-room", "-1"}, "must not be negative"},
	} {
		var stderr strings.Builder
		err := bench.Command(t.Context(), append([]string{"--target", "http://127.0.0.1:1"}, tt.args...), env, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.want) {
			t.Errorf("bench %q: %v %q, want an error saying %q", tt.args, err, stderr.String(), tt.want)
		}
	}
}
