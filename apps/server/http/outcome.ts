import type { FastifyReply, FastifyRequest } from 'fastify';
import { type Outcome, unwrap } from '../../application/call.ts';
import { noteOutcome } from './activity-log.ts';
import { publishDecision } from './limits.ts';

/**
 * A use case's outcome, taken in by the request of any face: what it touched for the activity record,
 * its edit-limit decision in the RateLimit fields (with `Retry-After` when refused); its value, or its
 * refusal thrown.
 */
export function settled<T>(request: FastifyRequest, reply: FastifyReply, outcome: Outcome<T>): T {
  noteOutcome(request, outcome);
  if (outcome.edits) publishDecision(request, reply, outcome.edits);
  return unwrap(outcome);
}
