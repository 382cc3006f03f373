"""Real gold SPARQL queries of the Freebase datasets that several tests read, verbatim."""

NS = "PREFIX ns: <http://rdf.freebase.com/ns/>\n"

#: WebQTest-100: a CVT with a time window
WINDOW = NS + """SELECT DISTINCT ?x
WHERE {
FILTER (?x != ns:m.045c7b)
FILTER (!isLiteral(?x) OR lang(?x) = '' OR langMatches(lang(?x), 'en'))
ns:m.045c7b ns:business.consumer_company.products ?y .
?y ns:business.company_product_relationship.consumer_product ?x .
FILTER(NOT EXISTS {?y ns:business.company_product_relationship.from_date ?sk0} ||
EXISTS {?y ns:business.company_product_relationship.from_date ?sk1 .
FILTER(xsd:datetime(?sk1) <= "2015-08-10"^^xsd:dateTime) })
FILTER(NOT EXISTS {?y ns:business.company_product_relationship.to_date ?sk2} ||
EXISTS {?y ns:business.company_product_relationship.to_date ?sk3 .
FILTER(xsd:datetime(?sk3) >= "2015-08-10"^^xsd:dateTime) })
}
"""
