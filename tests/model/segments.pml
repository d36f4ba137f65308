/* Queue storage without VACUUM (docs/queue-storage-design.md, "Lanes and cursors", "Rotation and
 * truncation"): one lane whose positions 1..P come from a sequence, its cursor (a sequence: read and
 * set atomically, outside MVCC and transactions), K = 2 segments in a ring. Two producers each take
 * a position (nextval, never undone) and read the open segment's number, append their entry to that
 * segment (invisible until commit: a hole), then commit or roll back. Two claimers (two claims and
 * one): one claim statement (one step, one snapshot) reads the cursor c, takes the first entry above
 * c that is committed, still listed (not consumed) and not locked (SKIP LOCKED), and notes the run
 * c+1, c+2, ... of positions consumed by committed work or voided, with no hole; later a blind
 * setval of the run's end if it is above c; then commit or roll back. Maintenance, up to MAINT
 * actions: void the lowest hole it can (lock_timeout: a producer still open wins), rotate (when the
 * next segment is empty), carry forward and truncate the sealed segment (its locks taken without
 * waiting, what is live re-checked under them). An open transaction holds a shared lock on the
 * tables it wrote or claimed from: a producer on its segment's q_ready and q_state, a claim on the
 * q_ready and then the q_state of its entry's segment. Assumed: (lane, pos) is unique across the
 * segments, and a void keeps out its position's producer even once the void's row is truncated
 * (per-segment tables and indexes do not give either by themselves).
 *
 * Checked (assertions and end states):
 *   - no message is lost: when everyone has finished and a drainer (which cannot fail) has claimed
 *     what is left above the cursor, every committed message was claimed by a committed claim;
 *   - none is delivered twice: a claim commits only on an entry no committed claim consumed;
 *   - the cursor never passes an open claim, nor a position not consumed by committed work and not
 *     voided (at every setval);
 *   - a truncation removes nothing live (no committed, unconsumed entry; no open producer's entry);
 *   - no lock wait cycle: every run ends (no invalid end state).
 * Broken variants spin must refute (tests/model/check.sh):
 *   -DBROKEN_OWN_CLAIM  the run counts the claimer's own uncommitted claim as consumed
 *   -DBROKEN_HOLE       the run passes over a producer's open entry (a hole)
 *   -DBROKEN_RECHECK    truncation carries forward what it saw before its lock, no re-check
 *   -DBROKEN_WAIT       maintenance waits for its locks, taking the state table before the ready
 *                       table (against the one fixed order): a claim holding ready waits for state
 */

#define P      3       /* positions the lane's sequence hands out */
#define MAINT  3       /* maintenance actions that take effect (4 verifies too: 3 million states) */

#define NONE   0       /* no row at this position in any live segment */
#define OPEN   1       /* a producer's entry, its transaction open */
#define MSG    2       /* a committed message entry */
#define VOID   3       /* a committed void entry */

byte next_pos = 1;     /* the lane's sequence: the next position nextval hands out */
byte cursor = 0;       /* the lane's cursor: every position at or below it is consumed */
byte open_seg = 0;     /* forgeyard.q_open_segment */
byte row[P + 1];       /* the row at each position: one at most, in any segment (assumed above) */
byte seg[P + 1];       /* the segment that row lives in */
byte claim_of[P + 1];  /* _pid of the open claim locking the entry (FOR UPDATE), 0 none */
bool consumed[P + 1];  /* the message's state no longer lists the position: a committed claim */
bool voided[P + 1];    /* ghost: a void committed here; the producer's insert conflicts, ever after */
bool committed[P + 1]; /* ghost: a producer committed a message at the position */
byte sh_ready[2];      /* per segment: bits (1 << _pid) of open transactions holding q_ready_j */
byte sh_state[2];      /* ... and q_state_j */
byte x_state = 0;      /* BROKEN_WAIT: 1 + j while maintenance holds q_state_j exclusively */

#define TOP (next_pos > P -> P : next_pos - 1)   /* the highest position handed out, in the bound */
#define bit (1 << _pid)
#define release(s) sh_ready[s] = sh_ready[s] & ~bit; sh_state[s] = sh_state[s] & ~bit

proctype Producer() {
  byte p, s;
  bool inserted = false;
  atomic { p = next_pos; next_pos++; s = open_seg };  /* nextval (never undone), and the open
                                                 segment's number: sealed by the insert, maybe */
  do
  :: atomic {                                  /* the insert: invisible to others until commit */
       p <= P && x_state != s + 1 ->           /* (x_state: BROKEN_WAIT only, an exclusive lock) */
       if
       :: voided[p] -> p = next_pos; next_pos++   /* conflict with a void: the next position */
       :: else ->
          row[p] = OPEN; seg[p] = s; inserted = true;
          sh_ready[s] = sh_ready[s] | bit; sh_state[s] = sh_state[s] | bit;
          break
       fi
     }
  :: p > P -> break                            /* the bound: no position left, nothing inserted */
  od;
  if
  :: atomic { inserted -> row[p] = MSG; committed[p] = true; release(s); p = 0; s = 0 }  /* commit */
  :: atomic { inserted -> row[p] = NONE; release(s); p = 0; s = 0 }      /* roll back */
  :: atomic { !inserted -> p = 0; s = 0 }
  fi
}

/* Part of the advance rule: position p extends the run (the claim's snapshot: committed work). */
#ifdef BROKEN_OWN_CLAIM
#define passable(p) (row[p] == VOID || row[p] == MSG && (consumed[p] || claim_of[p] == _pid))
#elif defined(BROKEN_HOLE)
#define passable(p) (row[p] == VOID || row[p] == MSG && consumed[p] || row[p] == OPEN)
#else
#define passable(p) (row[p] == VOID || row[p] == MSG && consumed[p])
#endif

proctype Claimer(byte rounds) {
  byte c, r, p, mine, a, n = 0;
  do
  :: n < rounds ->
     n++;
     atomic {                                  /* the claim statement, one snapshot */
       c = cursor;                             /* the cursor's value: no snapshot */
       for (p : c + 1 .. TOP) {                /* the first claimable entry in pos order */
         if
         :: mine == 0 && row[p] == MSG && !consumed[p] && claim_of[p] == 0 -> mine = p
         :: else -> skip                       /* a hole, consumed, or locked: SKIP LOCKED */
         fi
       }
       if
       :: mine != 0 -> claim_of[mine] = _pid; a = seg[mine]; sh_ready[a] = sh_ready[a] | bit;
#ifndef BROKEN_WAIT
          sh_state[a] = sh_state[a] | bit      /* and reads its state */
#endif
       :: else -> skip
       fi;
       r = c; p = c + 1;                       /* the run c+1, c+2, ... with no hole */
       do
       :: p <= TOP && passable(p) -> r = p; p++
       :: else -> break
       od;
       p = 0
     }
#ifdef BROKEN_WAIT
     if                                        /* reads the message's state: a step of its own */
     :: mine != 0 -> atomic { x_state != a + 1 -> sh_state[a] = sh_state[a] | bit }
     :: else -> skip
     fi;
#endif
     if
     :: r > c ->
        atomic {                               /* setval, blind: may lower a faster claim's value */
          for (p : 1 .. r) {
            assert(claim_of[p] == 0);          /* never past an open claim */
            assert(consumed[p] || voided[p])   /* never past what committed work did not consume */
          }
          cursor = r; p = 0; c = 0; r = 0
        }
     :: else -> c = 0; r = 0
     fi;
     if
     :: mine != 0 ->
        if
        :: atomic {                            /* commit: the message is delivered */
             assert(!consumed[mine]);          /* not delivered twice */
             consumed[mine] = true; claim_of[mine] = 0; release(a); mine = 0; a = 0
           }
        :: atomic { claim_of[mine] = 0; release(a); mine = 0; a = 0 }  /* roll back */
        fi
     :: else -> skip
     fi
  :: else -> break
  od
}

/* The live entries of segment j: committed, not consumed, above the cursor (as bits of a mask). */
inline live_mask(j, mask) {
  mask = 0;
  for (p : 1 .. P) {
    if
    :: row[p] == MSG && seg[p] == j && !consumed[p] && p > cursor -> mask = mask | (1 << p)
    :: else -> skip
    fi
  }
}

/* Carry forward the entries in mask (same position, into the open segment), empty segment j. */
inline truncate(j, mask) {
  for (p : 1 .. P) {
    if
    :: row[p] != NONE && seg[p] == j && (mask & (1 << p)) -> seg[p] = open_seg
    :: row[p] != NONE && seg[p] == j && !(mask & (1 << p)) ->
       assert(row[p] != OPEN);                 /* the lock keeps open producers out */
       assert(row[p] != MSG || consumed[p]);   /* nothing live is truncated */
       row[p] = NONE
    :: else -> skip
    fi
  }
}

proctype Maintenance() {
  byte n = 0, p, j, mask;
  bool vacant;
  do                                           /* n: actions that took effect (not timeouts) */
  :: atomic {                                  /* void the lowest hole above the cursor it can */
       n < MAINT ->
       for (p : cursor + 1 .. TOP) {
         if
         :: row[p] == NONE -> row[p] = VOID; seg[p] = open_seg; voided[p] = true; n++; break
         :: row[p] == OPEN -> skip             /* lock_timeout: waits for the producer, gives up */
         :: else -> skip
         fi
       };
       p = 0
     }
  :: atomic {                                  /* rotate when the next segment is empty */
       n < MAINT ->
       vacant = true;
       for (p : 1 .. P) {
         if
         :: row[p] != NONE && seg[p] != open_seg -> vacant = false
         :: else -> skip
         fi
       }
       if
       :: vacant -> open_seg = 1 - open_seg; n++
       :: else -> skip
       fi;
       p = 0; vacant = false
     }
#if defined(BROKEN_WAIT)                       /* waits for each lock, and state before ready */
  :: atomic { n < MAINT && sh_state[1 - open_seg] == 0 -> j = 1 - open_seg; x_state = j + 1 };
     atomic { sh_ready[j] == 0 -> live_mask(j, mask); truncate(j, mask); x_state = 0; n++ };
     p = 0; mask = 0; j = 0
#else
#ifdef BROKEN_RECHECK
  :: atomic { n < MAINT -> j = 1 - open_seg; live_mask(j, mask); p = 0 };  /* before the lock only */
     atomic {
#else
  :: atomic {                                  /* carry forward and truncate the sealed segment */
       n < MAINT -> j = 1 - open_seg;
#endif
       if                                      /* LOCK ready, state in that order, lock_timeout */
       :: sh_ready[j] == 0 && sh_state[j] == 0 ->
#ifndef BROKEN_RECHECK
          live_mask(j, mask);                  /* what to carry forward, seen under the lock */
#endif
          truncate(j, mask); n++
       :: else -> skip                         /* timed out: the next pass tries again */
       fi;
       p = 0; mask = 0; j = 0
     }
#endif
  :: break
  od
}

init {
  byte p;
  atomic { run Producer(); run Producer(); run Claimer(2); run Claimer(1); run Maintenance() }
  _nr_pr == 1;                                 /* everyone finished */
  atomic {
    for (p : cursor + 1 .. P) {                /* the drainer claims what is left above the cursor */
      if
      :: row[p] == MSG && !consumed[p] -> consumed[p] = true
      :: else -> skip
      fi
    }
    for (p : 1 .. P) {
      assert(!committed[p] || consumed[p])     /* no committed message lost */
    }
  }
}
