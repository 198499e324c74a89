package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/fencer-io/fencer/fsm/snapshot"
)

// backupOf writes body as its backup, then fails with err if set.
type backupOf struct {
	fakeCluster
	body []byte
	err  error
}

func (b *backupOf) Backup(_ context.Context, w io.Writer) (snapshot.Header, error) {
	if _, err := w.Write(b.body); err != nil {
		return snapshot.Header{}, err
	}
	return snapshot.Header{AppliedIndex: 7}, b.err
}

// A snapshot download answers the backup whole, its length announced, or
// an error and none of it; the temporary file it is buffered in (in the
// scratch directory, a node's data directory) is gone afterwards (fails
// with the file's removal left out: it stays there).
func TestSnapshotSaveBuffersInATemporaryFile(t *testing.T) {
	tmp := t.TempDir()
	body := bytes.Repeat([]byte("0123456789abcdef"), 300000) // 4.8 MB, past the 1 MB write buffer
	for _, fail := range []bool{false, true} {
		b := &backupOf{fakeCluster: fakeCluster{leader: true}, body: body}
		if fail {
			b.err = errors.New("disk on fire")
		}
		rec := httptest.NewRecorder()
		NewServer(b, b, nil, WithScratchDir(tmp)).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/cluster/snapshot", nil))
		switch {
		case fail && (rec.Code == http.StatusOK || bytes.Contains(rec.Body.Bytes(), body[:64])):
			t.Errorf("a failed backup answered %d with %d bytes", rec.Code, rec.Body.Len())
		case !fail && (rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), body)):
			t.Errorf("%d, %d bytes, want 200 and %d", rec.Code, rec.Body.Len(), len(body))
		case !fail && rec.Header().Get("Content-Length") != strconv.Itoa(len(body)):
			t.Errorf("Content-Length %q, want %d", rec.Header().Get("Content-Length"), len(body))
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
