-- The seeded database of needs = ["postgres"] (mcpvm): small and known,
-- so that a database server's answers can be checked against it.
CREATE TABLE customers (
  id integer PRIMARY KEY,
  name text NOT NULL,
  city text NOT NULL
);
INSERT INTO customers VALUES
  (1, 'Ada Lovelace', 'London'),
  (2, 'Grace Hopper', 'New York'),
  (3, 'Alan Turing', 'Manchester');

CREATE TABLE orders (
  id integer PRIMARY KEY,
  customer_id integer NOT NULL REFERENCES customers (id),
  item text NOT NULL,
  amount numeric(10, 2) NOT NULL
);
INSERT INTO orders VALUES
  (1, 1, 'analytical engine', 1843.00),
  (2, 2, 'compiler', 1952.00),
  (3, 2, 'debugger', 1947.00),
  (4, 3, 'bombe', 1939.00);

COMMENT ON TABLE customers IS 'seeded by mcpvm: token-7c1e';
