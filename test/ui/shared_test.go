package uitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// The page shows a lock held in shared mode as a row per shared holder,
// each with its token and a "shared" badge, the lock counted once as held;
// when the readers release and the queued writer gets the lock, its one
// row has no badge.
func TestDashboardShowsSharedHolders(t *testing.T) {
	chromiumPath(t)
	c := startCluster(t, 3)
	st := c.agreedLeader(c.nodes[0], "", "", 20*time.Second)
	f := follower(c, st.Leader)
	pg := openPage(t, f.url()+"/ui/")
	pg.waitFor(10*time.Second, "the page following the events", `document.querySelector("#events-state").dataset.state === "live"`)

	r1 := postJSON[wire.Grant](t, f, "/v1/locks/table/acquire", `{"holder":"reader-1","mode":"shared"}`)
	r2 := postJSON[wire.Grant](t, f, "/v1/locks/table/acquire", `{"holder":"reader-2","mode":"shared"}`)
	pg.waitFor(5*time.Second, "a row per shared holder, badged shared, the lock counted once", fmt.Sprintf(`(() => {
	  const rows = [...document.querySelectorAll('#locks tr[data-lock="table"]')];
	  const seen = rows.map(r => r.dataset.mode + " " + r.querySelector(".holder").textContent + " " + r.querySelector(".token").textContent + " " + !!r.querySelector(".badge.shared"));
	  return seen.join(",") === %q && document.querySelector("#locks-count").textContent === "1 held";
	})()`, fmt.Sprintf("shared reader-1 %d true,shared reader-2 %d true", r1.Token, r2.Token)))
	pg.shot("shared-holders")
	if low := eval[[]string](pg, lowContrast); len(low) > 0 {
		t.Errorf("text below WCAG AA contrast with shared holders shown: %q", low)
	}

	writer := make(chan string, 1)
	go func() {
		code, resp := request(f, http.MethodPost, "/v1/locks/table/acquire", "", `{"holder":"writer","wait_ms":20000}`)
		writer <- fmt.Sprint(code, " ", resp)
	}()
	for _, g := range []wire.Grant{r1, r2} {
		postJSON[wire.ReleaseResponse](t, f, "/v1/locks/table/release", fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token))
	}
	var w wire.Grant
	if got := <-writer; !strings.HasPrefix(got, "200 ") || json.Unmarshal([]byte(got[4:]), &w) != nil {
		t.Fatalf("the writer's acquire: %s", got)
	}
	pg.waitFor(5*time.Second, "the writer's one row, without the badge", fmt.Sprintf(`(() => {
	  const rows = [...document.querySelectorAll('#locks tr[data-lock="table"]')];
	  return rows.length === 1 && rows[0].dataset.mode === "exclusive" && rows[0].querySelector(".token").textContent === "%d" && !rows[0].querySelector(".badge.shared");
	})()`, w.Token))
	pg.shot("shared-then-writer")
}
