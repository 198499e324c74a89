package uitest

import (
	"fmt"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// The page shows a multi-lock as one grant: one row naming every lock it
// holds, with its one token and a "multi-lock" badge, and no revoke
// button (its names end together); a single lock beside it keeps its own
// row.
func TestDashboardShowsAMultiGrantAsOne(t *testing.T) {
	chromiumPath(t)
	c := startCluster(t, 3)
	st := c.agreedLeader(c.nodes[0], "", "", 20*time.Second)
	f := follower(c, st.Leader)
	pg := openPage(t, f.url()+"/ui/")
	pg.waitFor(10*time.Second, "the page following the events", `document.querySelector("#events-state").dataset.state === "live"`)

	single := postJSON[wire.Grant](t, f, "/v1/locks/report/acquire", `{"holder":"writer"}`)
	m := postJSON[wire.MultiGrant](t, f, "/v1/locks/acquire", `{"names":["acct.bob","acct.alice"],"holder":"transfer-7"}`)
	pg.waitFor(5*time.Second, "one row for the multi-lock's two names, badged, beside the single lock's", fmt.Sprintf(`(() => {
	  const rows = [...document.querySelectorAll('#locks tbody tr')];
	  const seen = rows.map(r => r.dataset.names + " " + r.querySelector(".holder").textContent + " " + r.querySelector(".token").textContent + " " + !!r.querySelector(".badge.multi"));
	  return seen.join(",") === %q && document.querySelector("#locks-count").textContent === "3 held";
	})()`, fmt.Sprintf("acct.alice,acct.bob transfer-7 %d true,report writer %d false", m.Token, single.Token)))
	pg.shot("multi-grant")
	if low := eval[[]string](pg, lowContrast); len(low) > 0 {
		t.Errorf("text below WCAG AA contrast with a multi-grant shown: %q", low)
	}
}
