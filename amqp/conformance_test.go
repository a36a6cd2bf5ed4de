package amqp

import (
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/sinktest"
	"github.com/flashsale/flashsale/writertest"
)

// TestWriterConformance: the publisher, with a consumer writing into
// SQLite, passes the suite every order writer passes.
func TestWriterConformance(t *testing.T) {
	writertest.Run(t, func(tb testing.TB) writertest.Harness {
		cfg := MustConfig(tb)
		db, _ := MustOpenSQLite(tb)
		StartConsumer(tb, cfg, db)
		return writertest.Harness{Writer: MustPublisher(tb, cfg), Store: db.Roles()}
	})
}

// TestSinkConformance: the events exchange passes the suite every events
// transport passes. The receiver is a queue bound to every event type, as
// a platform binds one; Down cuts the sink's link and refuses new ones.
func TestSinkConformance(t *testing.T) {
	sinktest.Run(t, func(tb testing.TB) sinktest.Harness {
		cfg := MustConfig(tb)
		proxy, pcfg := proxied(tb, cfg)
		sink, err := NewNoticeSink(pcfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { sink.Close() })

		conn, err := amqp091.Dial(cfg.URL)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { conn.Close() })
		ch, err := conn.Channel()
		if err != nil {
			tb.Fatal(err)
		}
		x := sink.EventsExchange()
		tb.Cleanup(func() {
			withChannel(tb, cfg, func(ch *amqp091.Channel) error { return ch.ExchangeDelete(x, false, false) })
		})
		if err := ch.ExchangeDeclare(x, amqp091.ExchangeTopic, true, false, false, false, nil); err != nil {
			tb.Fatal(err)
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err == nil {
			err = ch.QueueBind(q.Name, "#", x, false, nil)
		}
		if err != nil {
			tb.Fatal(err)
		}
		deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
		if err != nil {
			tb.Fatal(err)
		}
		var (
			mu  sync.Mutex
			got []flashsale.Notice
		)
		go func() {
			for d := range deliveries {
				test, _ := d.Headers["test"].(bool)
				mu.Lock()
				got = append(got, flashsale.Notice{ID: d.MessageId, Type: flashsale.NoticeType(d.Type), Payload: d.Body, Test: test})
				mu.Unlock()
			}
		}()
		return sinktest.Harness{
			Sink: sink,
			Received: func() []flashsale.Notice {
				mu.Lock()
				defer mu.Unlock()
				return append([]flashsale.Notice(nil), got...)
			},
			Down: func() {
				proxy.Refuse(true)
				proxy.Cut()
			},
		}
	})
}
