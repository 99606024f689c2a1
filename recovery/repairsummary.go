package recovery

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/kvstore/kv/record"
	"github.com/kvstore/kv/snapshot"
	"github.com/kvstore/kv/wal"
)

// maxRuns bounds the revision ranges and key ranges a summary line names.
const maxRuns = 4

// Summary sums up, a line each, what the plan drops: the readable records
// it gives up (how many, their revisions, and the files: where a segment
// is cut, which are set aside and as what), the keys of a snapshot it sets
// aside (how many, from which key to which), and, for a snapshot written
// again with the entries that read, how many it keeps and the key ranges
// it loses. The unreadable ranges are in Unreadable; Dropped and
// DroppedEntries list it all, record by record and key by key.
func (p *RepairPlan) Summary() []string {
	var out []string
	if l := p.recordSummary(); l != "" {
		out = append(out, l)
	}
	if l := p.entrySummary(); l != "" {
		out = append(out, l)
	}
	if l := p.rewriteSummary(); l != "" {
		out = append(out, l)
	}
	return out
}

// recordSummary words the records the plan drops and the segments they
// are in; "" when it changes no segment.
func (p *RepairPlan) recordSummary() string {
	var files []string
	for i := 0; i < len(p.Evidence); i++ {
		e := p.Evidence[i]
		seg, ok := wal.ParseSegmentName(path.Base(e.File))
		if !ok {
			continue
		}
		if !e.Moved {
			files = append(files, fmt.Sprintf("%s from offset %d to the end (copied to %s first)", path.Base(e.File), e.Cut, path.Base(e.To)))
			continue
		}
		// A run of segments set aside, each as NAME.broken, is one item.
		j := i
		for j+1 < len(p.Evidence) {
			n := p.Evidence[j+1]
			next, ok := wal.ParseSegmentName(path.Base(n.File))
			if !ok || !n.Moved || next != seg+wal.SegmentNum(j+1-i) || n.To != n.File+BrokenSuffix || e.To != e.File+BrokenSuffix {
				break
			}
			j++
		}
		switch {
		case j > i:
			files = append(files, fmt.Sprintf("%s–%s (set aside as NAME%s)", path.Base(e.File), path.Base(p.Evidence[j].File), BrokenSuffix))
		default:
			files = append(files, fmt.Sprintf("%s (set aside as %s)", path.Base(e.File), path.Base(e.To)))
		}
		i = j
	}
	if len(files) == 0 && len(p.Dropped) == 0 {
		return ""
	}
	var revs []record.Revision
	for _, d := range p.Dropped {
		revs = append(revs, d.Record.Revision)
	}
	head := "drops no readable record"
	if len(revs) > 0 {
		head = fmt.Sprintf("drops %s, %s", plural(len(revs), "record"), revisionRuns(revs))
	}
	if len(files) == 0 {
		return head
	}
	return head + ": " + strings.Join(files, ", ")
}

// entrySummary words the keys of a snapshot the plan sets aside; "" when
// it sets none aside.
func (p *RepairPlan) entrySummary() string {
	var moved *Evidence
	for i, e := range p.Evidence {
		if e.Moved && evidenceOf(path.Base(e.File)) == snapshot.Name {
			moved = &p.Evidence[i]
		}
	}
	if moved == nil {
		return ""
	}
	as := fmt.Sprintf("(set aside as %s)", path.Base(moved.To))
	if len(p.DroppedEntries) == 0 {
		return fmt.Sprintf("drops every key of %s: none reads %s", path.Base(moved.File), as)
	}
	lo, hi := p.DroppedEntries[0].Entry.Key, p.DroppedEntries[0].Entry.Key
	for _, e := range p.DroppedEntries[1:] {
		if bytes.Compare(e.Entry.Key, lo) < 0 {
			lo = e.Entry.Key
		}
		if bytes.Compare(e.Entry.Key, hi) > 0 {
			hi = e.Entry.Key
		}
	}
	return fmt.Sprintf("drops the %s of %s that read, %q to %q %s", plural(len(p.DroppedEntries), "key"), path.Base(moved.File), lo, hi, as)
}

// rewriteSummary words what a snapshot written again with the entries
// that read keeps and loses; "" for any other plan.
func (p *RepairPlan) rewriteSummary() string {
	if p.LostKeys == nil {
		return ""
	}
	if p.SnapshotCount <= p.KeptEntries {
		// The first record's count: the damage held no entry.
		return fmt.Sprintf("keeps all %s of the snapshot (its first record counts %d): its damage held none", plural(int(p.KeptEntries), "key"), p.SnapshotCount)
	}
	s := fmt.Sprintf("keeps the %s of the snapshot that read and loses %d (its first record counts %d)", plural(int(p.KeptEntries), "key"), p.SnapshotCount-p.KeptEntries, p.SnapshotCount)
	var spans []string
	for i, l := range p.LostKeys {
		if i == maxRuns {
			spans = append(spans, fmt.Sprintf("and %d more ranges", len(p.LostKeys)-maxRuns))
			break
		}
		spans = append(spans, keySpan(l.After, l.Before))
	}
	if len(spans) == 0 {
		return s
	}
	return s + ": the keys " + strings.Join(spans, "; ")
}

// revisionRuns words revs as ranges of consecutive revisions: "revision
// 7", "revisions 3001–4899", "revisions 4–5, 9–12".
func revisionRuns(revs []record.Revision) string {
	revs = slices.Clone(revs)
	slices.Sort(revs)
	revs = slices.Compact(revs)
	var runs []string
	n := 0
	for i := 0; i < len(revs); {
		j := i
		for j+1 < len(revs) && revs[j+1] == revs[j]+1 {
			j++
		}
		n++
		if len(runs) < maxRuns {
			if i == j {
				runs = append(runs, fmt.Sprint(uint64(revs[i])))
			} else {
				runs = append(runs, fmt.Sprintf("%d–%d", revs[i], revs[j]))
			}
		}
		i = j + 1
	}
	if n > maxRuns {
		runs = append(runs, fmt.Sprintf("… (%d ranges)", n))
	}
	word := "revisions"
	if len(revs) == 1 {
		word = "revision"
	}
	return word + " " + strings.Join(runs, ", ")
}

// plural words n things, "1 record" or "3 records".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
