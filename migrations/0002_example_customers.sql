-- Example data for the `lookup_customer` tool (agents/tools/lookup_customer.rs). Replace this
-- table with your own; the tool shows the pattern: parameterised queries on indexed columns.
CREATE TABLE customers (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  email TEXT NOT NULL,
  plan TEXT NOT NULL DEFAULT 'free',
  created_at INTEGER NOT NULL DEFAULT 0
);

CREATE UNIQUE INDEX customers_by_email ON customers (email COLLATE NOCASE);

INSERT INTO customers (id, name, email, plan, created_at) VALUES
  ('cus_1001', 'Ada Lovelace', 'ada@example.com', 'enterprise', 1700000000000),
  ('cus_1002', 'Grace Hopper', 'grace@example.com', 'pro', 1700000100000),
  ('cus_1003', 'Alan Turing', 'alan@example.com', 'free', 1700000200000);
