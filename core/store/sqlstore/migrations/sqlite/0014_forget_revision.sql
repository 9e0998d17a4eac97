-- forget_revision moves whenever ForgetEvents forgets a deleted node's or
-- check's pipeline state, so a running pipeline reloads its own.
INSERT INTO counters (name, value) VALUES ('forget_revision', 0);
