/* Queue storage with state kept with the listing (docs/queue-storage-design.md, "Open questions",
 * the leading candidate; bench/prototype/listings.sql is the protocol modelled): one lane whose
 * positions 1..P come from a sequence (nextval, never undone), its cursor (a sequence: read and set
 * atomically, outside MVCC and transactions). A listing is a row at a position carrying a message;
 * its claim is a receipt row, its end a closure row ('acked' or 'lapsed'), each unique per listing.
 * Two producers list one message each (invisible until commit: a hole; may roll back). Two claimers
 * of two rounds, as listings.claim(): read the cursor c and the walk's snapshot of the listings
 * above it, then, position by position in pos order (each a statement of its own): a hole (no
 * listing in the snapshot) breaks the run; a receipt with a closure is passed if nothing broke the
 * run; a receipt without a closure is in flight (breaks the run) and, if its deadline passed, is
 * rescued: its closure 'lapsed' inserted ON CONFLICT DO NOTHING and, if inserted, the message
 * listed again at the next position; no receipt: lock the listing FOR UPDATE SKIP LOCKED, insert
 * the receipt ON CONFLICT DO NOTHING, and stop if inserted. Then a blind setval of the run's end if
 * it is above c (a slower claim may lower it), then commit or roll back. The claimer then acks its
 * claim (listings.ack(): its closure 'acked' ON CONFLICT DO NOTHING, FY001 on a conflict; commit or
 * roll back) or never does. A clock lets committed receipts' deadlines pass. When everyone has
 * finished, a drainer (which cannot fail) claims and acks, or rescues once lapsed and acks, every
 * unclosed listing above the cursor.
 * Waits and abstractions: SKIP LOCKED skips while an open transaction holds the listing's lock. A
 * unique insert blocks while another open transaction holds an uncommitted row for the same key
 * (it waits for that transaction's end), then conflicts with a committed row or inserts. A receipt
 * insert never waits (its inserter holds the listing's lock: asserted). The walk's snapshot of the
 * listings is taken with the cursor's read (one step); a receipt's and its closure's lookups are one
 * step (both rows are permanent once committed); a rescue's closure insert and its re-listing are
 * one step (neither is visible before commit). Token = the receipt's listing (one receipt each).
 * Bound: no rescue takes a position that a producer yet to list needs (its deadline is taken as not
 * passed then); a deadline passes only once its receipt is committed (before, no one can see it).
 *
 * Checked (assertions and end states):
 *   - no loss: at the end every committed message has a listing closed by a committed ack;
 *   - no double delivery: a receipt commits only when no committed receipt of the same message is
 *     live (its listing unclosed, its deadline not passed); a message is never acked twice;
 *   - fencing: an ack commits only on a listing with no closure (a stale token gets FY001);
 *   - the cursor never passes a position not closed by committed work (at every setval);
 *   - no wait cycle: every run ends (no invalid end state).
 * Broken variants spin must refute (tests/model/check.sh):
 *   -DBROKEN_RECEIPT  receipts are not unique per listing: two claims of one listing both commit
 *   -DBROKEN_CURSOR   the run passes listings in flight (a receipt without a closure)
 *   -DBROKEN_RESCUE   a rescue lists again though its closure insert conflicted (IF FOUND dropped)
 *   -DBROKEN_ACK      an ack succeeds though its closure insert conflicted (IF FOUND dropped)
 *   -DBROKEN_CURSOR_LOSS  BROKEN_CURSOR without the setval assertion: what it costs, a lost message
 */

#define P      4       /* positions: two producers' and two re-listings */
#define M      2       /* messages, one per producer */
#define LAPSES 2       /* receipts whose deadline the clock lets pass */

#define NONE   0       /* closure: none committed */
#define ACKED  1
#define LAPSED 2
#ifdef BROKEN_CURSOR_LOSS
#define BROKEN_CURSOR
#endif

byte next_pos = 1;     /* the lane's sequence: the next position nextval hands out */
byte unlisted = M;     /* producers yet to take a position: a rescue leaves them room in P */
byte cursor = 0;       /* the lane's cursor: every position at or below it is closed */
bool listed[P + 1];    /* a committed listing at the position */
byte msg[P + 1];       /* its message (set by its inserter) */
byte l_open[P + 1];    /* _pid of the open transaction that inserted the listing, 0 none */
byte lock[P + 1];      /* _pid of the open transaction holding the listing FOR UPDATE, 0 none */
byte rc[P + 1];        /* committed receipts of the listing (at most one: the unique index) */
byte rc_open[P + 1];   /* _pid of the open transaction that inserted a receipt, 0 none */
byte cl[P + 1];        /* the committed closure: NONE, ACKED, LAPSED */
byte cl_open[P + 1];   /* _pid of the open transaction that inserted a closure, 0 none */
bool lapsed[P + 1];    /* the receipt's deadline passed (the clock) */
bool made[M + 1];      /* ghost: message m's producer committed */
byte acks[M + 1];      /* ghost: committed acks of message m */

proctype Producer(byte m) {
  byte p;
  atomic { p = next_pos; next_pos++; unlisted--; l_open[p] = _pid; msg[p] = m }  /* nextval */
  if                                           /* (inside the INSERT), then commit or roll back */
  :: atomic { listed[p] = true; l_open[p] = 0; made[m] = true; p = 0 }
  :: atomic { l_open[p] = 0; msg[p] = 0; p = 0 }                 /* a hole, for good */
  fi
}

/* The end of a claim transaction: its listings, closures, locks and receipt. */
inline end_claim(commit) {
  for (q : 1 .. P) {
    if
    :: l_open[q] == _pid -> l_open[q] = 0;
       if :: commit -> listed[q] = true :: else -> msg[q] = 0 fi
    :: else -> skip
    fi;
    if :: cl_open[q] == _pid -> cl_open[q] = 0; if :: commit -> cl[q] = LAPSED :: else -> skip fi
       :: else -> skip fi;
    if :: lock[q] == _pid -> lock[q] = 0 :: else -> skip fi
  };
  q = 0
}

proctype Claimer(byte rounds) {
  byte c, r, p, q, top, vis, mine, m, live, n = 0;
  bool brk, rescue, take, wrote, ok;
  do
  :: n < rounds ->
     n++;
     atomic {                                  /* the cursor, and the walk's snapshot of listings */
       c = cursor; r = c; top = c;
       for (q : c + 1 .. P) {
         if :: listed[q] -> vis = vis | (1 << q); top = q :: else -> skip fi
       };
       p = c + 1; q = 0
     }
     do
     :: p > top -> break
     :: p <= top ->
        atomic {                               /* the receipt's and the closure's lookups */
          if
          :: !(vis & (1 << p)) -> brk = true   /* a hole */
          :: else ->
             if
             :: rc[p] > 0 && cl[p] != NONE ->  /* closed: extends the run if nothing broke it */
                if :: !brk -> r = p :: else -> skip fi
             :: rc[p] > 0 && cl[p] == NONE ->  /* in flight */
#ifndef BROKEN_CURSOR
                brk = true;
#endif
                rescue = lapsed[p]
             :: rc[p] == 0 -> brk = true; take = true
             fi
          fi
        }
        if
        :: rescue ->
           atomic {                            /* closure 'lapsed': waits for an open inserter */
             cl_open[p] == 0 ->
             if
             :: cl[p] == NONE && next_pos + unlisted <= P -> cl_open[p] = _pid; ok = true
#ifdef BROKEN_RESCUE
             :: cl[p] != NONE && next_pos + unlisted <= P -> ok = true  /* conflict ignored */
#endif
             :: else -> skip                   /* conflict: DO NOTHING (or the bound) */
             fi;
             if
             :: ok -> q = next_pos; next_pos++; l_open[q] = _pid; msg[q] = msg[p]; wrote = true
             :: else -> skip                   /* listed again above, attempt + 1 */
             fi;
             rescue = false; ok = false; q = 0
           }
        :: take ->
           atomic {
             if
             :: lock[p] == 0 ->                /* FOR UPDATE SKIP LOCKED */
                lock[p] = _pid; wrote = true;
                assert(rc_open[p] == 0);       /* the receipt insert never waits */
#ifdef BROKEN_RECEIPT
                rc_open[p] = _pid; mine = p    /* no unique index */
#else
                if
                :: rc[p] > 0 -> skip           /* conflict: claimed and committed since */
                :: else -> rc_open[p] = _pid; mine = p
                fi
#endif
             :: else -> skip                   /* locked by an open transaction: skipped */
             fi;
             take = false
           }
        :: else -> skip
        fi;
        if :: mine != 0 -> break :: else -> p++ fi
     od;
     if
     :: r > c ->
        atomic {                               /* setval, blind: may lower a faster claim's value */
#ifndef BROKEN_CURSOR_LOSS
          for (q : 1 .. r) {
            assert(cl[q] != NONE)              /* never past what committed work did not close */
          };
#endif
          cursor = r; q = 0
        }
     :: else -> skip
     fi;
     c = 0; r = 0; p = 0; top = 0; vis = 0; brk = false;
     if
     :: wrote ->
        if
        :: atomic {                            /* commit */
             m = msg[mine];                    /* (msg[0]: 0, no receipt) */
             if
             :: mine != 0 ->
                for (q : 1 .. P) {
                  if
                  :: listed[q] && msg[q] == m && rc[q] > 0 && cl[q] == NONE && !lapsed[q] -> live++
                  :: else -> skip
                  fi
                };
                assert(live == 0);             /* not delivered twice */
                rc[mine]++; rc_open[mine] = 0; m = 0
             :: else -> skip
             fi;
             end_claim(true); wrote = false
           }
        :: atomic {                            /* roll back */
             end_claim(false); rc_open[mine] = 0; mine = 0; wrote = false
           }
        fi
     :: else -> skip
     fi;
     if
     :: mine != 0 ->                           /* its claim committed: ack it, or never */
        if
        :: atomic {                            /* closure 'acked': waits for an open inserter */
             cl_open[mine] == 0 ->
             if
             :: cl[mine] == NONE -> cl_open[mine] = _pid; ok = true
#ifdef BROKEN_ACK
             :: else -> ok = true              /* conflict ignored: no FY001 */
#else
             :: else -> skip                   /* conflict: FY001, the ack fails */
#endif
             fi
           }
           if
           :: ok ->
              if
              :: atomic {                      /* commit */
                   assert(cl[mine] == NONE);   /* fencing: never a closed listing */
                   m = msg[mine];
                   assert(acks[m] == 0);       /* never acked twice */
                   acks[m]++; cl[mine] = ACKED; cl_open[mine] = 0; m = 0
                 }
              :: atomic { cl_open[mine] = 0 }  /* roll back */
              fi
           :: else -> skip
           fi
        :: skip                                /* never acked: its deadline will pass */
        fi
     :: else -> skip
     fi;
     mine = 0; live = 0; ok = false
  :: else -> break
  od
}

proctype Clock() {
  byte q, n = 0;
  do
  :: atomic {                                  /* a committed receipt's deadline passes */
       n < LAPSES ->
       for (q : 1 .. P) {
         if
         :: rc[q] > 0 && cl[q] == NONE && !lapsed[q] -> lapsed[q] = true; n++; break
         :: true -> skip
         fi
       };
       q = 0
     }
  :: break
  od
}

init {
  byte p, m;
  atomic { run Producer(1); run Producer(2); run Claimer(2); run Claimer(2); run Clock() }
  _nr_pr == 1;                                 /* everyone finished */
  atomic {
    for (p : cursor + 1 .. P) {                /* the drainer: what is left above the cursor */
      if
      :: listed[p] && cl[p] == NONE ->         /* claim and ack (or rescue, claim and ack) */
         m = msg[p];
         assert(acks[m] == 0);                 /* never acked twice */
         acks[m]++; cl[p] = ACKED
      :: else -> skip
      fi
    };
    for (m : 1 .. M) {
      assert(!made[m] || acks[m] > 0)          /* no committed message lost */
    }
  }
}
