/* The ready lanes as built in 0.10.0 (sql/src/forgeyard.sql: queue_lanes, queue_lane_marks,
 * queue_lanes_maintain; extension/queue_lanes.sql: lane_list, lane_walk, lane_advance; docs/
 * architecture.md, "Ready lanes"): one lane, an append-only list of entries (pos, msg) whose
 * positions 1..P come from a sequence (nextval: non-transactional, dense, never undone), and its
 * cursor (a sequence: read and set outside MVCC and transactions). A message is listed at the
 * position of its entry (ready_pos) until it is consumed.
 * Two producers list one message each: take the transaction's id first (pg_current_xact_id(): ids
 * come from one counter in increasing order, and are running until the transaction ends), then a
 * position (nextval, inside the INSERT), then insert the entry there (invisible until commit: a
 * gap meanwhile), then commit or roll back (the position stays a gap for good).
 * Two claimers of two rounds, each round a transaction: it reads the cursor c and, in one snapshot
 * (committed work), the run c+1, c+2, ... of positions consumed (a void, or an entry whose message
 * committed work acked), stopping at a position with no visible entry (a gap: a producer open or
 * rolled back) or a listed message; then, a step of its own, a blind setval of the run's end if it
 * is above c (a slower claim may set it below a faster one's value); then it claims the first
 * committed, listed message above c that no one holds (FOR UPDATE SKIP LOCKED, the row re-checked
 * under its lock) and commits its claim and ack together, or rolls back (the message stays listed).
 * Maintenance, MAINT passes of four steps: the gap walk's snapshot (every position taken with no
 * committed entry); the voids: when its mark is settled (every transaction id below the mark's
 * xmax has ended), a void inserted at each gap at or below the mark's last position, ON CONFLICT
 * DO NOTHING (an entry committed since the walk is left alone); then a new mark, when there is
 * none or it is settled: the sequence's last value L, then xmax (the first id not yet assigned:
 * what the producers holding positions at or below L must have been given, their id taken first;
 * the real pass reads every lane's L in its first statement, then takes its own transaction's id,
 * pg_current_xact_id(), which is that first unassigned id, and makes no mark if it had one).
 * The rule's claim: a position at or below a settled mark belongs to an ended producer, so a void
 * never waits for a producer (its insert would wait on an uncommitted entry) and never takes a
 * position from one still open (its direct insert would conflict with the void).
 * When everyone has finished, a drainer (which cannot fail) claims and acks every message still
 * listed above the cursor. Not modelled: the deletion of consumed entries at or below the cursor,
 * maintain()'s own cursor moves (claims' by another name), acks in a later transaction.
 *
 * Checked (assertions):
 *   - a producer never finds its position taken by a void, and a void is never inserted where a
 *     producer's entry is still open (it would wait): voids take no position from an open producer;
 *   - no message is lost: at the end every committed message was acked exactly once (by a claim,
 *     or by the drainer above the cursor), and no other was;
 *   - the cursor never passes a position not consumed by committed work (at every setval, against
 *     the true committed state: what the snapshot saw consumed stays consumed; a gap it saw may
 *     since hold a committed entry, which is why a gap stops the run);
 *   - none is delivered twice: a claim commits only on a message no committed claim acked.
 * Broken variants spin must refute (tests/model/check.sh):
 *   -DBROKEN_MARK_ORDER    the mark reads xmax before L: a producer given its id after the xmax
 *                          read and its position before the L read is below the mark, not covered
 *   -DBROKEN_LATE_XID      producers take their position before their transaction's id
 *   -DBROKEN_GAP_RUN       the run passes over a gap: the cursor passes an entry committed later
 *   -DBROKEN_SNAPSHOT_XMAX the mark's xmax is a snapshot's (pg_snapshot_xmax: one past the latest
 *                          completed id, not the first unassigned): an id already running is not
 *                          below it
 */

#define P      2       /* positions the lane's sequence hands out: one per producer */
#define X      2       /* transaction ids handed out: one per producer (claims' ids not modelled) */
#define MAINT  3       /* maintenance passes */

#define NONE   0       /* no entry committed or open at the position */
#define OPEN   1       /* a producer's entry, its transaction open */
#define MSG    2       /* a committed message entry */
#define VOID   3       /* a committed void */

byte next_pos = 1;     /* the lane's sequence: the next position nextval hands out */
byte next_xid = 1;     /* the next transaction id to assign */
bool running[X + 1];   /* by id: the transaction has its id and has not ended */
#ifdef BROKEN_SNAPSHOT_XMAX
byte done_xid = 0;     /* the highest id that has ended (latestCompletedXid) */
#endif
byte cursor = 0;       /* the lane's cursor: every position at or below it is consumed */
byte entry[P + 1];     /* the entry at each position (the primary key: one at most) */
byte claim_of[P + 1];  /* _pid of the open claim holding the message listed there, 0 none */
bool consumed[P + 1];  /* a committed claim acked the message listed there */
bool has_mark = false; /* queue_lane_marks: the lane's mark */
byte mark_pos = 0;     /* ... the sequence's last value when it was made */
byte mark_xmax = 0;    /* ... and the first transaction id not assigned then */
bool committed[P + 1]; /* ghost: a producer committed a message at the position */
byte acks[P + 1];      /* ghost: committed acks of the message at the position */

#define TOP (next_pos - 1)                     /* the sequence's last value: positions taken */
/* Consumed by committed work: what a claim's snapshot sees and what the cursor may pass. */
#define consumed_at(p) (entry[p] == VOID || entry[p] == MSG && consumed[p])
/* The mark is settled: no transaction with an id below its xmax is running (a snapshot's xmin
 * at or above it); ids 1..X, X = 2. */
#define settled ((!running[1] || mark_xmax <= 1) && (!running[2] || mark_xmax <= 2))
#ifdef BROKEN_SNAPSHOT_XMAX
#define XMAX (done_xid + 1)
#define ended(x) running[x] = false; if :: x > done_xid -> done_xid = x :: else -> skip fi
#else
#define XMAX next_xid
#define ended(x) running[x] = false
#endif

proctype Producer() {
  byte x, p;
#ifdef BROKEN_LATE_XID
  atomic { p = next_pos; next_pos++ };         /* nextval first */
  atomic { x = next_xid; next_xid++; running[x] = true };
#else
  atomic { x = next_xid; next_xid++; running[x] = true };  /* pg_current_xact_id() */
  atomic { p = next_pos; next_pos++ };         /* nextval, inside the INSERT */
#endif
  atomic {                                     /* the entry's insert: a gap to others until commit */
    assert(entry[p] != VOID);                  /* never a position a void took */
    entry[p] = OPEN
  }
  if
  :: atomic { entry[p] = MSG; committed[p] = true; ended(x); x = 0; p = 0 }  /* commit */
  :: atomic { entry[p] = NONE; ended(x); x = 0; p = 0 }  /* roll back: a gap for good */
  fi
}

proctype Claimer(byte rounds) {
  byte c, r, p, mine, n = 0;
  do
  :: n < rounds ->
     n++;
     atomic {                                  /* the cursor, and the walk's snapshot */
       c = cursor; r = c; p = c + 1;           /* the run c+1, c+2, ... of consumed positions */
       do
       :: p <= TOP && consumed_at(p) -> r = p; p++
#ifdef BROKEN_GAP_RUN
       :: p <= TOP && (entry[p] == NONE || entry[p] == OPEN) -> p++  /* a gap passed over */
#endif
       :: else -> break                        /* a gap, or a message still listed */
       od;
       p = 0
     }
     if
     :: r > c ->
        atomic {                               /* setval, blind: may lower a faster claim's value */
          for (p : 1 .. r) {
            assert(consumed_at(p))             /* never past what committed work did not consume */
          };
          cursor = r; p = 0
        }
     :: else -> skip
     fi;
     atomic {                                  /* the claim: FOR UPDATE SKIP LOCKED, re-checked */
       for (p : c + 1 .. TOP) {
         if
         :: mine == 0 && entry[p] == MSG && !consumed[p] && claim_of[p] == 0 ->
            claim_of[p] = _pid; mine = p
         :: else -> skip
         fi
       };
       p = 0; c = 0; r = 0
     }
     if
     :: mine != 0 ->
        if
        :: atomic {                            /* commit the claim and its ack */
             assert(!consumed[mine]);          /* not delivered twice */
             consumed[mine] = true; acks[mine]++; claim_of[mine] = 0; mine = 0
           }
        :: atomic { claim_of[mine] = 0; mine = 0 }  /* roll back: the message stays listed */
        fi
     :: else -> skip
     fi
  :: else -> break
  od
}

proctype Maintenance() {
  byte n = 0, g, gaps, last, xmax;
  do
  :: n < MAINT ->
     n++;
     atomic {                                  /* the gap walk's snapshot */
       for (g : 1 .. TOP) {
         if
         :: entry[g] != MSG && entry[g] != VOID -> gaps = gaps | (1 << g)
         :: else -> skip                       /* (OPEN is invisible: a gap in the snapshot) */
         fi
       };
       g = 0
     }
     atomic {                                  /* the voids, once the mark is settled */
       if
       :: has_mark && settled ->
          for (g : 1 .. mark_pos) {
            if
            :: gaps & (1 << g) ->
               assert(entry[g] != OPEN);       /* never waits for a producer still open */
               if
               :: entry[g] == NONE -> entry[g] = VOID
               :: else -> skip                 /* ON CONFLICT DO NOTHING: committed since */
               fi
            :: else -> skip
            fi
          }
       :: else -> skip
       fi;
       g = 0; gaps = 0
     }
     /* A new mark when there is none or it is settled: L, then xmax (each read a step). */
#ifdef BROKEN_MARK_ORDER
     xmax = XMAX;
     atomic {
       last = TOP;
#else
     last = TOP;
     atomic {
       xmax = XMAX;
#endif
       if
       :: !has_mark || settled -> has_mark = true; mark_pos = last; mark_xmax = xmax
       :: else -> skip
       fi;
       last = 0; xmax = 0
     }
  :: else -> break
  od
}

init {
  byte p;
  atomic { run Producer(); run Producer(); run Claimer(2); run Claimer(2); run Maintenance() }
  _nr_pr == 1;                                 /* everyone finished */
  atomic {
    for (p : cursor + 1 .. P) {                /* the drainer: what is listed above the cursor */
      if
      :: entry[p] == MSG && !consumed[p] -> consumed[p] = true; acks[p]++
      :: else -> skip
      fi
    };
    for (p : 1 .. P) {
      assert(committed[p] == (acks[p] == 1))   /* no committed message lost, none acked twice */
    }
  }
}
