#!/usr/bin/env python3
"""Summarises a guest's ftrace window of workqueue and scheduler events
(tests/profile_guest.sh with OXE_PROF_TRACE): for each CPU, how much of the
window it ran each kind of task and how long it was idle; for each work
function, how many turns it ran on which CPU and how long they took; and who
queued which work on which CPU. oxe's QP tasks are named by their work item
ID (send, recv, retry, rnr: rust/qp/mod.rs); other work by its function.

perf's samples say where busy time goes; this says who ran where, and
which task handed work to which CPU: the placement a profile cannot show
(an ACK's completer turn holding the SQ, so that the poster's doorbell
queues its requester work on the responder's CPU, say).

Usage: trace_summary.py TRACE_FILE
"""
import collections
import re
import sys

LINE = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')
OXE_TASKS = {'0': 'oxe send', '1': 'oxe recv', '2': 'oxe retry', '3': 'oxe rnr'}


def work_name(text):
    m = re.search(r'WorkItemPointerKy(\d)_', text)
    if m and 'oxe' in text:
        return OXE_TASKS.get(m.group(1), 'oxe task ' + m.group(1))
    m = re.search(r'function[= ]([^\s\[]+)', text)
    return m.group(1)[:40] if m else '?'


def who(comm):
    """A command, with kernel workers and idle folded together."""
    if comm.startswith('kworker'):
        return 'kworker' + ('H' if re.search(r'H[-+]|H$', comm) else '')
    if comm.startswith('swapper'):
        return 'idle'
    return comm


def main(path):
    events = []
    for line in open(path, errors='replace'):
        m = LINE.match(line)
        if m:
            comm, _pid, cpu, ts, ev, rest = m.groups()
            events.append((float(ts), int(cpu), comm, ev, rest))
    if not events:
        sys.exit(f'{path}: no events')
    t0, t1 = events[0][0], events[-1][0]
    span = t1 - t0
    print(f'window {span * 1e3:.1f} ms, {len(events)} events')

    running = {}          # cpu -> (since, what)
    cpu_time = collections.Counter()
    started = {}          # cpu -> (since, work)
    turns = collections.defaultdict(list)
    queued = collections.Counter()
    switches = collections.Counter()
    for ts, cpu, comm, ev, rest in events:
        if ev == 'sched_switch':
            m = re.search(r'prev_comm=(.*?) prev_pid=.*next_comm=(.*?) next_pid', rest)
            if not m:
                continue
            prev, nxt = m.groups()
            since, what = running.get(cpu, (t0, who(prev)))
            cpu_time[(cpu, what)] += ts - since
            running[cpu] = (ts, who(nxt))
            switches[(cpu, who(prev))] += 1
        elif ev == 'workqueue_execute_start':
            started[cpu] = (ts, work_name(rest))
        elif ev == 'workqueue_execute_end' and cpu in started:
            since, w = started.pop(cpu)
            turns[(w, cpu)].append(ts - since)
        elif ev == 'workqueue_queue_work':
            m = re.search(r'\bcpu=(\d+)\s*$', rest)
            queued[(who(comm), cpu, work_name(rest), m.group(1) if m else '?')] += 1
    for cpu, (since, what) in running.items():
        cpu_time[(cpu, what)] += t1 - since

    print('\n## time on each CPU (share of the window; from sched_switch)')
    for (cpu, what), t in sorted(cpu_time.items()):
        if t / span >= 0.005:
            print(f'  cpu{cpu} {what:<20} {100 * t / span:5.1f}%  switched out {switches[(cpu, what)]}x')
    print('\n## work turns')
    for (w, cpu), d in sorted(turns.items(), key=lambda kv: -sum(kv[1])):
        d.sort()
        print(f'  {w:<40} cpu{cpu} {len(d):6d} turns, {sum(d) * 1e3:7.2f} ms, '
              f'median {d[len(d) // 2] * 1e6:6.1f} us, p90 {d[int(len(d) * 0.9)] * 1e6:6.1f} us')
    print('\n## queued work (by whom, from which CPU, to which CPU)')
    for (by, cpu, w, to), n in sorted(queued.items(), key=lambda kv: -kv[1]):
        print(f'  {by:<16} cpu{cpu} -> cpu{to} {w:<40} {n:6d}x')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
