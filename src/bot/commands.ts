// The command menu: registered with Telegram (setMyCommands) in this order, and listed by /help.
export const COMMANDS = [
  { command: 'start', description: 'What this is and where to point your SDK' },
  { command: 'newkey', description: 'Create an API key (shown once)' },
  { command: 'balance', description: 'Balance, held and available' },
  { command: 'topup', description: 'Buy credit with Telegram Stars' },
  { command: 'usage', description: 'Your last requests and what they cost' },
  { command: 'prices', description: 'What each model costs, as charged' },
  { command: 'history', description: 'Top-ups, charges and refunds' },
  { command: 'rotate', description: 'Replace a key; the old one stops at once' },
  { command: 'console', description: 'A one-time sign-in link to the web console' },
  { command: 'org', description: 'Your organisations, your role and the balance left' },
  { command: 'budget', description: 'Your budgets: spent, left and when each resets' },
  { command: 'invite', description: 'An invitation link to your organisation (owners, admins)' },
  { command: 'refund', description: 'Refund a Stars top-up of your organisation (owners, billing)' },
  { command: 'paysupport', description: 'Help with payments and refunds' },
  { command: 'help', description: 'All commands' },
];
