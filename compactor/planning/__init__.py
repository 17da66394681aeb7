"""Pure planning: policies + table states + now -> Plan."""
