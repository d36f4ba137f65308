/* Queue delivery with claim tokens: claim, ack, nack, extend, visibility expiry, reclaim, and
 * consumers that crash. One message; two consumers that may crash at any step; one consumer that
 * does not. Each operation is one SQL call (one transaction under the message's row lock), so it is
 * one atomic step here. The rules are those of core/delivery (decide_ack, check_nack,
 * check_extend) and of the claim statement; docs/architecture.md, "Model-checked protocols", says
 * what is abstracted away.
 *
 * Checked (assertions and end states):
 *   - a stale token never acks: an ack that finishes carries the newest token issued;
 *   - no two consumers complete one delivery: only the holder of the current claim finishes it,
 *     and the message is finished at most once;
 *   - no message is lost across a consumer crash: the surviving consumer never waits forever for
 *     it, and at the end it is acked or dead-lettered.
 * Broken variants spin must refute (tests/model/check.sh):
 *   -DBROKEN_ACK         ack ignores the claim token
 *   -DBROKEN_TOKEN       a reclaim hands out the previous claim token again
 *   -DBROKEN_REDELIVERY  a claim whose visibility ran out never becomes claimable again
 */

#define MAX_TOKEN    6   /* the survivor's claims stop lapsing after this: runs are finite */
#define MAX_ATTEMPTS 2   /* nacks before the message is dead-lettered */

mtype = { pending, acked, dead };

mtype state = pending;
byte  claim_token = 0;   /* 0: not claimed (never, or nacked) */
bool  visible = false;   /* the current claim's visibility has not run out */
byte  holder = 0;        /* ghost: _pid of the consumer holding the current claim */
byte  attempts = 0;
byte  last_token = 0;    /* ghost: the newest token issued */
byte  completions = 0;   /* ghost: acks that finished the delivery */
byte  running = 3;       /* consumers still running */
byte  survivor = 0;      /* _pid of the consumer that does not crash */

#define claimable (state == pending && (claim_token == 0 || !visible))

/* claim: a pending message that is unclaimed or whose visibility ran out gets a new token.
 * Called only when claimable (the callers' guards). */
inline issue(tok) {
#ifdef BROKEN_TOKEN
  if
  :: claim_token != 0 -> tok = claim_token
  :: else -> last_token++; tok = last_token
  fi;
#else
  last_token++; tok = last_token;
#endif
  claim_token = tok; visible = true; holder = _pid
}

#ifdef BROKEN_REDELIVERY
#define can_claim (state == pending && claim_token == 0)
#else
#define can_claim claimable
#endif

/* ack (decide_ack): acked or dead is a no-op; a token that is not the current claim is FY001;
 * otherwise the delivery is finished, even after its visibility ran out if nobody reclaimed. */
inline ack(tok) {
  atomic {
    if
    :: state != pending -> skip
#ifdef BROKEN_ACK
    :: else ->
#else
    :: state == pending && claim_token == tok ->
#endif
       assert(tok == last_token);   /* a stale token never acks */
       assert(holder == _pid);      /* only the current claim's consumer completes it */
       completions++;
       assert(completions == 1);    /* one message, completed once */
       state = acked; claim_token = 0; visible = false
#ifndef BROKEN_ACK
    :: else -> skip                 /* FY001 */
#endif
    fi
  }
}

/* nack (check_nack): only the current claim of a pending message; retry later or dead-letter. */
inline nack(tok) {
  atomic {
    if
    :: state == pending && claim_token == tok ->
       attempts++; claim_token = 0; visible = false;
       if
       :: attempts >= MAX_ATTEMPTS -> state = dead
       :: else -> skip
       fi
    :: else -> skip                 /* FY001 */
    fi
  }
}

/* extend (check_extend): only the current claim while its visibility has not run out; it keeps
 * the claim visible, which here means the step changes nothing. */
inline extend(tok) {
  atomic {
    if
    :: state == pending && claim_token == tok && visible -> skip
    :: else -> skip                 /* FY001 */
    fi
  }
}

/* A consumer that may crash after any step: up to two claims, each followed by an ack, a nack,
 * an extend and an ack, or nothing (it crashed holding the claim). */
proctype Consumer() {
  byte tok;
  byte rounds = 0;
  do
  :: rounds < 2 ->
     rounds++;
     atomic {
       if
       :: can_claim -> issue(tok)
       :: else -> tok = 0          /* nothing to claim */
       fi
     };
     if
     :: tok != 0 ->
        if
        :: true -> ack(tok)
        :: true -> nack(tok)
        :: true -> extend(tok); ack(tok)
        :: true                    /* crashed while holding the claim */
        fi
     :: else -> skip
     fi
  :: break                         /* crashed */
  od;
  atomic { running-- }
}

/* The consumer that does not crash: waits for the message to be claimable and acks it, until it is
 * acked or dead. A lost message leaves it waiting forever: an invalid end state. */
proctype Survivor() {
  byte tok;
  survivor = _pid;
  do
  :: state != pending -> break
  :: atomic { can_claim -> issue(tok) }; ack(tok)
  od;
  atomic { running-- }
}

/* Time: a claim's visibility may run out at any moment. The survivor's own claims stop lapsing
 * after MAX_TOKEN tokens, so every run ends; crashed consumers' claims always lapse. */
proctype Clock() {
  do
  :: atomic { visible && (holder != survivor || last_token < MAX_TOKEN) -> visible = false }
  :: running == 0 -> break
  od
}

init {
  atomic { run Consumer(); run Consumer(); run Survivor(); run Clock() }
  running == 0;
  assert(state == acked || state == dead)   /* nothing lost */
}
