"""What people read: the run summary, terminal tables, markdown, artifacts and events."""
