package watch

import (
	"bytes"
	"strconv"
	"time"
)

// sseEvent gathers the fields of one Server-Sent Event, line by line.
type sseEvent struct {
	typ   string
	data  []byte
	id    string
	hasID bool
	retry time.Duration
}

// line adds one line of the stream and reports whether it ended the event
// (a blank line). Comments (":…") are skipped, and so are fields this client
// does not use. Unlike a browser, the id takes effect only when its event is
// complete: a stream cut between an id and its event's end must resume
// before that event, not after it.
func (ev *sseEvent) line(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0] == ':' {
		return false
	}
	field, value, _ := bytes.Cut(b, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		ev.typ = string(value)
	case "data":
		ev.data = append(append(ev.data, value...), '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			ev.id, ev.hasID = string(value), true
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
			ev.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return false
}

// scanLines splits an event stream into lines ended by "\r\n", "\n" or "\r".
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		// An unfinished line at the end is dropped with its event.
		return len(data), nil, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a "\r" last: wait to see whether "\n" follows
}
