import type { CommandModule } from '../command.ts';
import { peopleCommand } from './people.ts';

/** `staff create|set-password`: a member of the support staff (read-only audit across accounts). */
export const run: CommandModule['run'] = peopleCommand({
  name: 'staff',
  async create(accounts, _rt, person) {
    return { staff_id: (await accounts.addStaff(person)).staffId };
  },
  async setPassword({ accounts, credentials }, _rt, email, password) {
    const { DomainError } = await import('../../../domain/errors.ts');
    const staff = await accounts.findStaffByEmail(email);
    if (!staff) throw new DomainError('not_found', `No staff member with email ${email}`);
    await credentials.setStaffPassword(staff.id, password);
    return { staff_id: staff.id, email: staff.email };
  },
});
