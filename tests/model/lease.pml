/* Leases with fencing epochs: acquire, renew, release, expiry, and fenced writes. One resource,
 * two workers that may stop (crash) after any step. Each API call is one SQL call under the
 * lease row's lock, so one atomic step here; a fenced write is a transaction of several steps:
 * lease_fence (which checks the epoch and keeps the grant from changing hands until the transaction
 * ends), the protected write, then commit. The rules are those of core/lease (decide_acquire,
 * is_live, next_epoch) and extension/lease.cpp; docs/architecture.md, "Model-checked protocols",
 * says what is abstracted away.
 *
 * Checked (assertions):
 *   - epochs strictly increase: every grant's epoch is above every earlier one;
 *   - a stale epoch's fenced write is never accepted: a committed write carries the epoch of the
 *     current grant, and committed writes' epochs never go down (no two holders' writes interleave).
 * Broken variants spin must refute (tests/model/check.sh):
 *   -DBROKEN_FENCE  fence does not compare the epoch with the live grant
 *   -DBROKEN_LOCK   fence checks the epoch but does not hold the grant until commit
 *   -DBROKEN_EPOCH  a take-over keeps the previous epoch instead of a new one
 */

#define MAX_EPOCH 6    /* grants stop lapsing after this epoch: runs are finite */
#define WORKERS   2

byte owner = 0;        /* _pid of the holder of the last grant; 0 never granted */
byte epoch = 0;        /* epoch of the last grant */
bool live = false;     /* the last grant is neither expired nor released */
byte fenced_by = 0;    /* _pid of a transaction that fenced the grant and has not ended */
byte max_granted = 0;  /* ghost: the largest epoch ever granted */
byte last_write = 0;   /* ghost: epoch of the last committed fenced write */
byte running = WORKERS;

/* acquire (decide_acquire): live and held by me: same epoch, extended; live and held by another:
 * contended; otherwise a new grant with next_epoch(previous) = previous + 1 here (the clock term
 * of next_epoch only makes it larger). A fenced grant cannot change hands: acquire waits for the
 * fencing transaction to end, as it waits on the row lock. */
inline acquire(e) {
  atomic {
    (fenced_by == 0 || fenced_by == _pid);
    if
    :: live && owner == _pid -> e = epoch
    :: live && owner != _pid -> e = 0            /* contended */
    :: else ->
#ifdef BROKEN_EPOCH
       if
       :: epoch == 0 -> epoch = 1
       :: else -> skip
       fi;
#else
       assert(epoch < 255);
       epoch = epoch + 1;
#endif
       assert(epoch > max_granted);              /* epochs strictly increase */
       max_granted = epoch;
       owner = _pid; live = true; e = epoch
    fi
  }
}

/* renew: FY001 unless e is the live grant (an expired lease cannot be renewed). Keeps it live. */
inline renew(e, ok) {
  atomic {
    if
    :: live && epoch == e -> ok = true
    :: else -> ok = false                        /* FY001 */
    fi
  }
}

/* release: ends the live grant with this epoch; the epoch is kept, never handed out again. */
inline release(e) {
  atomic {
    if
    :: live && epoch == e && (fenced_by == 0 || fenced_by == _pid) -> live = false
    :: else -> skip
    fi
  }
}

/* lease_fence inside the writer's transaction: FY001 unless e is the live grant; then the grant
 * cannot change hands until the transaction ends. */
inline fence(e, ok) {
  atomic {
    (fenced_by == 0 || fenced_by == _pid);
    if
#ifdef BROKEN_FENCE
    :: true ->
#else
    :: live && epoch == e ->
#endif
       ok = true;
#ifndef BROKEN_LOCK
       fenced_by = _pid
#endif
    :: else -> ok = false                        /* FY001: the transaction rolls back */
    fi
  }
}

/* The protected write commits: the storage accepts it. */
inline commit_write(e) {
  atomic {
    assert(e == epoch);                          /* only the current grant's epoch writes */
    assert(e >= last_write);                     /* writes of two holders never interleave */
    last_write = e;
    if
    :: fenced_by == _pid -> fenced_by = 0
    :: else -> skip
    fi
  }
}

/* The writer's transaction rolls back (an error, or its connection died): the fence ends. */
inline abort_write() {
  atomic {
    if
    :: fenced_by == _pid -> fenced_by = 0
    :: else -> skip
    fi
  }
}

proctype Worker() {
  byte e = 0;
  bool ok;
  byte rounds = 0;
  do
  :: rounds < 3 ->
     rounds++;
     acquire(e);
     if
     :: e != 0 ->
        if
        :: true -> renew(e, ok)
        :: true -> skip
        fi;
        if
        :: true ->                               /* a fenced write */
           fence(e, ok);
           if
           :: ok -> commit_write(e)
           :: ok -> abort_write()                 /* rolled back, or the worker died */
           :: else -> skip
           fi
        :: true -> skip
        fi;
        if
        :: true -> release(e)
        :: true -> skip                          /* keeps it until it lapses */
        fi
     :: else -> skip
     fi
  :: break                                       /* crashed */
  od;
  atomic { running-- }
}

/* Time: the live grant may expire at any moment, also while a write is fenced (the fence keeps it
 * from changing hands, not from expiring). Bounded by MAX_EPOCH so runs end. */
proctype Clock() {
  do
  :: atomic { live && epoch < MAX_EPOCH -> live = false }
  :: running == 0 -> break
  od
}

init {
  atomic { run Worker(); run Worker(); run Clock() }
}
