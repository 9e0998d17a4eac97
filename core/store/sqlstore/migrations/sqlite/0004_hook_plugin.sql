-- An outbox job runs an action plugin instead of an HTTP POST when plugin
-- (a marshalled unyo.v1.PluginAction) is set.
ALTER TABLE hooks ADD COLUMN plugin BLOB;
