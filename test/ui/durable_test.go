package uitest

import (
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// The events feed says in words that a durable waiter queued, and that
// its wait ran out: "queued durably at N" and "durable wait (queued at N)
// ran out", not the event's JSON.
func TestDashboardShowsDurableWaiters(t *testing.T) {
	chromiumPath(t)
	c := startCluster(t, 3)
	st := c.agreedLeader(c.nodes[0], "", "", 20*time.Second)
	f := follower(c, st.Leader)
	pg := openPage(t, f.url()+"/ui/")
	pg.waitFor(10*time.Second, "the page following the events", `document.querySelector("#events-state").dataset.state === "live"`)

	postJSON[wire.Grant](t, f, "/v1/locks/batch/acquire", `{"holder":"first","ttl_ms":30000}`)
	code, body := request(f, "POST", "/v1/locks/batch/acquire", "", `{"holder":"second","wait_ms":300,"durable":true,"request_id":"ui-durable-0000001"}`)
	if code != 409 || !strings.Contains(body, wire.CodeLockHeld) {
		t.Fatalf("the durable waiter's wait: %d %s", code, body)
	}
	pg.waitFor(10*time.Second, "the queued and dequeued lines", `(() => {
	  const line = type => document.querySelector('#feed li[data-type="' + type + '"] .what');
	  const q = line("queued"), d = line("dequeued");
	  return !!q && !!d && /second queued durably at \d+/.test(q.textContent) && /second's durable wait \(queued at \d+\) ran out/.test(d.textContent);
	})()`)
	pg.shot("durable-waiter")
}
