import { unwrap } from '../../application/call.ts';
import type { CommandModule } from '../command.ts';
import { peopleCommand } from './people.ts';

/** `staff create|set-password`: a member of the support staff (read-only audit across accounts). */
export const run: CommandModule['run'] = peopleCommand({
  name: 'staff',
  async create(accounts, _rt, person) {
    return { staff_id: unwrap(await accounts.addStaff(person)).staffId };
  },
  async setPassword(credentials, _rt, email, password) {
    const staff = unwrap(await credentials.setStaffPassword(email, password));
    return { staff_id: staff.id, email: staff.email };
  },
});
