"""What `forget` frees and what `space` measures, as text and as JSON
documents (doc/json-output.md: `## obnam forget --pretend`, `## obnam
forget`, `## obnam space`).

`forget --pretend`'s lines keep their first three TAB-separated fields
(id, end time, verdict); a forgotten generation's line gets a fourth,
`frees N bytes (HUMAN)`, and the table ends in a total line.
"""

from obnamlib.cli import humanise, json_output
from obnamlib.engine import listing


def bytes_text(amount):
    """`1234567 bytes (1.2 MiB)`."""
    return '%d bytes (%s)' % (amount, humanise.size_decimal(amount))


# --- forget --------------------------------------------------------------

def pretend_lines(decisions, freed):
    """The decision table with what each forgotten generation would free,
    then the leftovers of killed runs (if any) and the total."""
    lines = []
    for decision in decisions:
        line = decision.line()
        if not decision.keep:
            line += '\tfrees ' + bytes_text(
                freed.of_generation(decision.gen_id) or 0)
        lines.append(line)
    if freed.leftovers:
        lines.append('Would free %s left by interrupted runs'
                     % bytes_text(freed.leftovers))
    lines.append('Would free %s in total' % bytes_text(freed.total))
    return lines


def forget_document(client_name, decisions, freed, pretend):
    """The JSON of `forget` (pretend: what it would do and free; else
    what it did and freed).  freed None: nothing was looked at."""
    prefix = 'frees_bytes' if pretend else 'freed_bytes'
    document = json_output.name_fields('client', client_name)
    document['pretend'] = pretend
    document['generations'] = [
        _decision_fields(decision, freed, prefix) for decision in decisions]
    document[prefix + '_leftovers'] = 0 if freed is None else freed.leftovers
    document[prefix + '_total'] = 0 if freed is None else freed.total
    return document


def _decision_fields(decision, freed, prefix):
    fields = {'id': decision.spec}
    fields.update(json_output.time_fields('ended', decision.end_time))
    fields['keep'] = decision.keep
    fields['reasons'] = list(decision.reasons)
    fields[prefix] = None if decision.keep else \
        (freed.of_generation(decision.gen_id) or 0)
    return fields


# --- space ---------------------------------------------------------------

SPACE_HEADINGS = ('generation', 'ended', 'file data', 'stored', 'only here')


def space_lines(report):
    """An aligned table of the client's generations, then the
    repository's totals."""
    rows = [SPACE_HEADINGS] + [
        (gen.spec, listing.local_time(gen.ended),
         humanise.size_decimal(gen.data_bytes),
         humanise.size_decimal(gen.stored_bytes),
         humanise.size_decimal(gen.unique_bytes))
        for gen in report.generations]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ['  '.join([row[0].ljust(widths[0]), row[1].ljust(widths[1])] +
                       [cell.rjust(width)
                        for cell, width in zip(row[2:], widths[2:])]).rstrip()
             for row in rows]
    ratio = report.ratio
    lines += [
        '',
        'Chunk files in the repository: %d, %s' % (
            report.chunk_count, bytes_text(report.chunk_bytes)),
        'File data in its %d generations (all clients): %s' % (
            report.generation_count, bytes_text(report.generations_bytes)),
        'File data per stored byte (de-duplication and compression): %s' % (
            '-' if ratio is None else '%.2f' % ratio),
    ]
    return lines


def space_document(report):
    """The JSON of `space`."""
    document = json_output.name_fields('client', report.client_name)
    document['generations'] = [_generation_fields(gen)
                               for gen in report.generations]
    document['repository'] = {
        'chunk_bytes': report.chunk_bytes,
        'chunk_count': report.chunk_count,
        'generations_bytes': report.generations_bytes,
        'generation_count': report.generation_count,
        'client_count': report.client_count,
        'ratio': report.ratio,
    }
    return document


def _generation_fields(gen):
    fields = {'id': gen.spec}
    fields.update(json_output.time_fields('started', gen.started))
    fields.update(json_output.time_fields('ended', gen.ended))
    fields['bytes'] = gen.data_bytes
    fields['stored_bytes'] = gen.stored_bytes
    fields['unique_bytes'] = gen.unique_bytes
    return fields
